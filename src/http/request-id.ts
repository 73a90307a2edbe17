/**
 * `X-Request-Id`: the client's when it is a plausible id, else a new UUID. An unfit client value is
 * replaced, not refused: it is a tracing aid, and it must never carry a log-injection payload, nor
 * a token (a JWT of up to 128 characters fits the grammar) or the admin token into the log.
 */
import { randomBytes } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { holdsSecret } from '../observability/secrets.js';
import { fieldValue } from './raw-headers.js';

/** The ids one process hands out before it draws a new random part (the counter's 48 bits). */
const IDS_PER_PREFIX = 2 ** 48;

/**
 * A UUID of version 8 (RFC 9562 §5.8, the layout of its own): 74 random bits drawn once per
 * 2^48 ids, then a 48-bit counter. Unique like a random UUID (a process never repeats its
 * counter; two processes share a random part with odds of one in 2^74), and made with one
 * number-to-string conversion, where `crypto.randomUUID` joins sixteen pairs of hex digits, one
 * string each, on every hit (docs/architecture.md#why-the-hit-path-is-built-as-it-is).
 */
class RequestIds {
  #prefix = '';
  #next = IDS_PER_PREFIX;

  next(): string {
    if (this.#next >= IDS_PER_PREFIX) this.#draw();
    const counter = this.#next++;
    return this.#prefix + counter.toString(16).padStart(12, '0');
  }

  #draw(): void {
    const hex = randomBytes(10).toString('hex');
    // xxxxxxxx-xxxx-8xxx-Vxxx-: version 8, and the variant's two bits 10 in V.
    const variant = ((Number.parseInt(hex.slice(15, 16), 16) & 0x3) | 0x8).toString(16);
    this.#prefix = `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(12, 15)}-${variant}${hex.slice(16, 19)}-`;
    this.#next = 0;
  }
}

const ids = new RequestIds();

/** A new request id (a UUID). */
export function newRequestId(): string {
  return ids.next();
}

/** A client's `X-Request-Id` kept as given (also the OpenAPI description's pattern). */
export const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/**
 * The UUIDs handed out, one per request: the request log, the problem body and the
 * `X-Request-Id` header may each ask, and a fresh UUID for each would leave the log line naming
 * an id the client never saw. Weak, so an answered request takes its id with it. A client's own
 * id needs no entry: reading the header again gives the same answer.
 */
const generated = new WeakMap<IncomingMessage, string>();

/** The client's `X-Request-Id` when it is fit to keep, else `undefined`. */
export function clientRequestId(req: IncomingMessage): string | undefined {
  const value = fieldValue(req, 'x-request-id');
  return value !== undefined && REQUEST_ID.test(value) && !holdsSecret(value) ? value : undefined;
}

/**
 * The request's id, the same every time it is asked for. The data plane asks once, as it opens
 * the exchange that then holds the id (`clientRequestId ?? newRequestId()`, without this map).
 */
export function requestIdOf(req: IncomingMessage): string {
  const client = clientRequestId(req);
  if (client !== undefined) return client;
  let id = generated.get(req);
  if (id === undefined) {
    id = newRequestId();
    generated.set(req, id);
  }
  return id;
}
