/**
 * The process logger (pino) and the one request line per API request (README, "Operations"). The line holds
 * the path in a form that cannot carry a token (`logged-path.ts`; redaction does not reach inside
 * URLs) and never a token: the redaction list covers every place a secret could sit in a logged
 * object.
 */
import { messageOf } from '../errors/proxy-error.js';
import { pino, type Logger, type LevelWithSilent } from 'pino';

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
 * shutdown): one write(2) per ~15 request lines instead of one each. Measured with `npm run bench`,
 * a write per line cost ~3 µs of a ~20 µs cache hit. The price: a crash can lose the last
 * few KiB of lines, and a stdout that stops reading stalls the process, as a full pipe would anyway.
 */
export function createLogger(level: LevelWithSilent, destination?: pino.DestinationStream): Logger {
  // No pid or hostname on every line: the platform's log shipper knows where a line came from.
  const options = { level, base: null, redact: { paths: REDACTED_PATHS, censor: '[redacted]' } };
  return pino(options, destination ?? pino.destination({ dest: 1, sync: true, minLength: 4096, periodicFlush: 250 }));
}

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

export function createRequestLog(logger: Logger): RequestLog {
  if (!logger.isLevelEnabled('info')) return () => undefined;
  return (f) => {
    logger.info({
      req_id: f.requestId,
      method: f.method,
      path: f.path,
      resource: f.resource,
      status: f.status,
      code: f.errorCode,
      company: f.company,
      sub: f.subject,
      cache: f.cache,
      upstream_ms: f.upstreamMs === undefined ? undefined : Math.round(f.upstreamMs * 10) / 10,
      ms: Math.round(f.durationMs * 100) / 100,
    });
  };
}

/** The fields a log line gives an error: its message only (a library error may carry a payload or a key). */
export function errorFields(error: unknown): { readonly err: { readonly message: string } } {
  return { err: { message: messageOf(error) } };
}
