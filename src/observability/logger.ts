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

/**
 * A destination that takes the request lines of one event-loop turn as one write, at the end of
 * the turn (`setImmediate`): sonic-boom measures the bytes of its whole pending buffer on every
 * write (`Buffer.byteLength` of a string of up to 4 KiB), a cost every hit paid while each line
 * was a write of its own (issue 11). Any other line (pino's) writes the gathered lines before
 * itself, so lines keep the order they were made in; `flush` (shutdown) writes them too.
 */
class TurnBatchedLines implements pino.DestinationStream {
  readonly #inner: pino.DestinationStream & { flush?: (callback: (error?: Error) => void) => void };
  #gathered = '';
  #scheduled = false;
  readonly #writeGathered = (): void => {
    this.#scheduled = false;
    this.#drain();
  };

  constructor(inner: pino.DestinationStream) {
    this.#inner = inner;
  }

  /** A request line: written with the others of this turn. */
  gather(line: string): void {
    this.#gathered += line;
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

  #drain(): void {
    if (this.#gathered === '') return;
    const lines = this.#gathered;
    this.#gathered = '';
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

/**
 * The request line. A line a request makes is the line pino would make of the same fields (level,
 * time, then the fields in this order; absent ones left out), written from a template straight to
 * the logger's destination (gathered per event-loop turn): pino's generic path (serialising an object, checking every key against
 * the redaction list) cost a cache hit more than everything else it does in JavaScript (issue 11).
 * Nothing here can hold a secret: a logged path never carries client text that could be a token
 * (`logged-path.ts`) and a request id never holds one (`request-id.ts`). A logger not made by
 * `createLogger` gets the same fields through `logger.info`.
 */
export function createRequestLog(logger: Logger): RequestLog {
  if (!logger.isLevelEnabled('info')) return () => undefined;
  const destination = DESTINATIONS.get(logger);
  if (destination === undefined) return (f) => logger.info(requestLineFields(f));
  return function writeRequestLine(f) {
    destination.gather(
      `{"level":${INFO},"time":${Date.now()}` +
        `,"req_id":${jsonString(f.requestId)},"method":${jsonString(f.method)},"path":${jsonString(f.path)}` +
        `${stringField('resource', f.resource)},"status":${f.status}${stringField('code', f.errorCode)}` +
        `${stringField('company', f.company)}${stringField('sub', f.subject)}${stringField('cache', f.cache)}` +
        `${f.upstreamMs === undefined ? '' : `,"upstream_ms":${roundedUpstreamMs(f.upstreamMs)}`}` +
        `,"ms":${roundedMs(f.durationMs)}}\n`,
    );
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
