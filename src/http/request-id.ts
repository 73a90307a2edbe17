/**
 * `X-Request-Id`: the client's when it is a plausible id, else a new UUID. An unfit client value is
 * replaced, not refused: it is a tracing aid, and it must never carry a log-injection payload, nor
 * a token (a JWT of up to 128 characters fits the grammar) or the admin token into the log.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';
import { holdsSecret } from '../observability/secrets.js';
import { fieldValue } from './raw-headers.js';

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
 * the exchange that then holds the id (`clientRequestId ?? randomUUID()`, without this map).
 */
export function requestIdOf(req: IncomingMessage): string {
  const client = clientRequestId(req);
  if (client !== undefined) return client;
  let id = generated.get(req);
  if (id === undefined) {
    id = randomUUID();
    generated.set(req, id);
  }
  return id;
}
