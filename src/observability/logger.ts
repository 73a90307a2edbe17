/**
 * The process logger (pino) and the one request line per API request (docs/operations.md#logs). The line holds
 * the path in a form that cannot carry a token (`logged-path.ts`; redaction does not reach inside
 * URLs) and never a token: the redaction list covers every place a secret could sit in a logged
 * object.
 */

import { type LevelWithSilent, type Logger, pino } from 'pino';
import { messageOf } from '../errors/proxy-error.js';

export const REDACTED_PATHS = [
  'req.headers.authorization',
  'req.headers.cookie',
  'res.headers["set-cookie"]',
  'headers.authorization',
  'authorization',
  'token',
  'err.payload',
  'err.command.args',
  'payload',
];

export const LOG_LEVELS: readonly LevelWithSilent[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/**
 * Log lines are gathered into 4 KiB writes (flushed every 250 ms when traffic is light, and on
 * shutdown): one write(2) for many request lines instead of one each, which a hit cannot afford
 * (docs/architecture.md#why-the-hit-path-is-built-as-it-is). The price: a crash can lose the last
 * few KiB of lines, and a stdout that stops reading stalls the process, as a full pipe would anyway.
 */
export function createLogger(level: LevelWithSilent, destination?: pino.DestinationStream): Logger {
  // No pid or hostname on every line: the platform's log shipper knows where a line came from.
  const options = { level, base: null, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } };
  const stream = new TurnBatchedLines(
    destination ?? pino.destination({ dest: 1, sync: true, minLength: 4096, periodicFlush: 250 }),
  );
  const logger = pino(options, stream);
  DESTINATIONS.set(logger, stream);
  return logger;
}

/** Bytes of request lines kept for a turn before a write, at first (it grows to what a turn needs). */
const INITIAL_TURN_BYTES = 64 * 1024;
const DIGIT_0 = 0x30;

/**
 * A destination that takes the request lines of one event-loop turn as one write, at the end of
 * the turn (`setImmediate`): sonic-boom measures the bytes of its whole pending buffer on every
 * write (`Buffer.byteLength` of a string of up to 4 KiB), a cost every hit paid while each line
 * was a write of its own. A request line is written as its parts straight into the turn's bytes
 * (numbers digit by digit): it makes no string of its own, nor one per join, and the turn's lines
 * become one string when they are handed on (docs/architecture.md#why-the-hit-path-is-built-as-it-is).
 * Any other line (pino's) writes the gathered lines before itself, so lines keep the order they
 * were made in; `flush` (shutdown) writes them too.
 */
class TurnBatchedLines implements pino.DestinationStream {
  readonly #inner: pino.DestinationStream & { flush?: (callback: (error?: Error) => void) => void };
  #bytes = Buffer.allocUnsafe(INITIAL_TURN_BYTES);
  #length = 0;
  #scheduled = false;
  readonly #writeGathered = (): void => {
    this.#scheduled = false;
    this.#drain();
  };

  constructor(inner: pino.DestinationStream) {
    this.#inner = inner;
  }

  /** Text of a request line (any Unicode, as UTF-8), written with the others of this turn. */
  text(part: string): void {
    this.#reserve(part.length * 3);
    this.#length += this.#bytes.write(part, this.#length, 'utf8');
  }

  /** A JSON string of `value` (quoted as it is when nothing in it needs escaping). */
  jsonText(value: string): void {
    if (!PLAIN.test(value)) return this.text(JSON.stringify(value));
    this.#reserve(value.length * 3 + 2);
    this.#bytes[this.#length++] = 0x22;
    this.#length += this.#bytes.write(value, this.#length, 'utf8');
    this.#bytes[this.#length++] = 0x22;
  }

  /** A whole number of at most 15 digits, ≥ 0, as JSON writes it (else as `String` does). */
  integer(value: number): void {
    if (!(value >= 0 && value < 1e15 && Number.isInteger(value))) return this.text(String(value));
    let digits = 1;
    for (let rest = value; rest >= 10; rest = Math.floor(rest / 10)) digits += 1;
    this.#reserve(digits);
    let rest = value;
    for (let at = this.#length + digits - 1; at >= this.#length; at--) {
      this.#bytes[at] = DIGIT_0 + (rest % 10);
      rest = Math.floor(rest / 10);
    }
    this.#length += digits;
  }

  /**
   * `units / 10^places` (`units` a whole number, `places` 1 or 2) as `String` writes that number:
   * its integer part, then its decimals without trailing zeros, if any.
   */
  decimal(units: number, places: 1 | 2): void {
    const scale = places === 1 ? 10 : 100;
    if (!(units >= 0 && units < 1e15 && Number.isInteger(units))) return this.text(String(units / scale));
    const fraction = units % scale;
    this.integer((units - fraction) / scale);
    if (fraction === 0) return;
    this.#reserve(places + 1);
    this.#bytes[this.#length++] = 0x2e; // .
    if (places === 1) this.#bytes[this.#length++] = DIGIT_0 + fraction;
    else {
      this.#bytes[this.#length++] = DIGIT_0 + Math.floor(fraction / 10);
      if (fraction % 10 !== 0) this.#bytes[this.#length++] = DIGIT_0 + (fraction % 10);
    }
  }

  /** The line is complete: written at the end of this turn with the others. */
  endLine(): void {
    this.#reserve(1);
    this.#bytes[this.#length++] = 0x0a;
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#writeGathered);
    }
  }

  /** pino's lines. */
  write(line: string): void {
    this.#drain();
    this.#inner.write(line);
  }

  flush(callback: (error?: Error) => void): void {
    this.#drain();
    if (typeof this.#inner.flush === 'function') this.#inner.flush(callback);
    else callback();
  }

  #reserve(bytes: number): void {
    if (this.#length + bytes <= this.#bytes.length) return;
    const larger = Buffer.allocUnsafe(Math.max(this.#bytes.length * 2, this.#length + bytes));
    this.#bytes.copy(larger, 0, 0, this.#length);
    this.#bytes = larger;
  }

  #drain(): void {
    if (this.#length === 0) return;
    const lines = this.#bytes.toString('utf8', 0, this.#length);
    this.#length = 0;
    this.#inner.write(lines);
  }
}

/** Where each logger made by `createLogger` writes: the request line is gathered there directly. */
const DESTINATIONS = new WeakMap<Logger, TurnBatchedLines>();

export interface RequestLogFields {
  readonly requestId: string;
  readonly method: string;
  /** The path in its loggable form (`logged-path.ts`): never the query, never a token. */
  readonly path: string;
  readonly resource: string | undefined;
  readonly status: number;
  readonly errorCode: string | undefined;
  readonly company: string | undefined;
  readonly subject: string | undefined;
  /** hit, stale, miss, collapsed. */
  readonly cache: string | undefined;
  readonly upstreamMs: number | undefined;
  readonly durationMs: number;
}

export type RequestLog = (fields: RequestLogFields) => void;

/** pino's number for `info`, the request line's level. */
const INFO = 30;
const LINE_START = `{"level":${INFO},"time":`;

/** A JSON string: the text as it is when nothing in it needs escaping (as pino's own `asString`). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding control characters is its purpose (JSON must escape them).
const PLAIN = /^[^"\\\u0000-\u001f\ud800-\udfff]*$/;
function jsonString(text: string): string {
  return PLAIN.test(text) ? `"${text}"` : JSON.stringify(text);
}

/** `,"name":<value>` for a string field that is present, else nothing (pino omits `undefined`). */
function stringField(name: string, value: string | undefined): string {
  return value === undefined ? '' : `,"${name}":${jsonString(value)}`;
}

/** Distinct values a fragment table keeps; past them, a line makes its fragments itself. */
const FRAGMENTS_KEPT = 10_000;

/**
 * The parts of the request line that repeat from request to request, each made once: a route's
 * method, path and resource, a principal's company and subject, an error code, a cache result.
 * A line is then a few joins rather than a dozen JSON strings made anew for every request
 * (docs/architecture.md#why-the-hit-path-is-built-as-it-is). Two keys, two levels: no key is
 * joined to be looked up. Bounded, as a 404's path is the client's.
 */
class FragmentTable {
  readonly #byFirst = new Map<string, Map<string | undefined, string>>();
  #size = 0;

  get(first: string, second: string | undefined, make: () => string): string {
    let inner = this.#byFirst.get(first);
    const known = inner?.get(second);
    if (known !== undefined) return known;
    const made = make();
    if (this.#size >= FRAGMENTS_KEPT) return made;
    if (inner === undefined) {
      inner = new Map();
      this.#byFirst.set(first, inner);
    }
    inner.set(second, made);
    this.#size += 1;
    return made;
  }
}

/**
 * The request line. A line a request makes is the line pino would make of the same fields (level,
 * time, then the fields in this order; absent ones left out), written from a template straight to
 * the logger's destination (gathered per event-loop turn): pino's generic path (serialising an object, checking every key against
 * the redaction list) costs a cache hit more than everything else it does in JavaScript.
 * Nothing here can hold a secret: a logged path never carries client text that could be a token
 * (`logged-path.ts`) and a request id never holds one (`request-id.ts`). A logger not made by
 * `createLogger` gets the same fields through `logger.info`.
 */
export function createRequestLog(logger: Logger): RequestLog {
  if (!logger.isLevelEnabled('info')) return () => undefined;
  const destination = DESTINATIONS.get(logger);
  if (destination === undefined) return (f) => logger.info(requestLineFields(f));
  const routes = new FragmentTable();
  const identities = new FragmentTable();
  const outcomes = new FragmentTable();
  return function writeRequestLine(f) {
    const route = routes.get(f.path, f.method, () => `,"method":${jsonString(f.method)},"path":${jsonString(f.path)}`);
    const resource =
      f.resource === undefined ? '' : outcomes.get('resource', f.resource, () => stringField('resource', f.resource));
    const identity =
      f.company === undefined
        ? stringField('sub', f.subject)
        : identities.get(
            f.company,
            f.subject,
            () => `${stringField('company', f.company)}${stringField('sub', f.subject)}`,
          );
    const code =
      f.errorCode === undefined ? '' : outcomes.get('code', f.errorCode, () => stringField('code', f.errorCode));
    const cache = f.cache === undefined ? '' : outcomes.get('cache', f.cache, () => stringField('cache', f.cache));
    const line = destination;
    line.text(LINE_START);
    line.integer(Date.now());
    line.text(',"req_id":');
    line.jsonText(f.requestId);
    line.text(route);
    line.text(resource);
    line.text(',"status":');
    line.integer(f.status);
    line.text(code);
    line.text(identity);
    line.text(cache);
    if (f.upstreamMs !== undefined) {
      line.text(',"upstream_ms":');
      line.decimal(Math.round(f.upstreamMs * 10), 1);
    }
    line.text(',"ms":');
    line.decimal(Math.round(f.durationMs * 100), 2);
    line.text('}');
    line.endLine();
  };
}

const roundedUpstreamMs = (ms: number): number => Math.round(ms * 10) / 10;
const roundedMs = (ms: number): number => Math.round(ms * 100) / 100;

/** The request line's fields as an object, in the line's order. */
export function requestLineFields(f: RequestLogFields): Record<string, string | number | undefined> {
  return {
    req_id: f.requestId,
    method: f.method,
    path: f.path,
    resource: f.resource,
    status: f.status,
    code: f.errorCode,
    company: f.company,
    sub: f.subject,
    cache: f.cache,
    upstream_ms: f.upstreamMs === undefined ? undefined : roundedUpstreamMs(f.upstreamMs),
    ms: roundedMs(f.durationMs),
  };
}

/** The fields a log line gives an error: its message only (a library error may carry a payload or a key). */
export function errorFields(error: unknown): { readonly err: { readonly message: string } } {
  return { err: { message: messageOf(error) } };
}
