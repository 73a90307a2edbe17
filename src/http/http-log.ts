/**
 * The request line of the Express planes (fallback and admin), with pino-http (docs/operations.md#logs): the
 * fields and names of the data plane's line where they apply (`createRequestLog`), so one query
 * reads both. What it leaves out is deliberate: no request headers at all (Authorization, Cookie,
 * and whatever a client invents), no `req.url` (redaction does not reach inside URLs: the query may
 * hold `access_token`, and the path a token too; the path is logged word by word, `loggedPath`),
 * no error objects (jose's carry the claims, ioredis's the command).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { pinoHttp } from 'pino-http';
import { loggedPath } from '../observability/logged-path.js';
import { problemCodeOf } from './problem.js';
import { requestIdOf } from './request-id.js';

/** Express middleware: `app.use(httpLog)` before every route. */
export type HttpLog = (req: IncomingMessage, res: ServerResponse, next: () => void) => void;

const MESSAGE = 'request';

/** The target up to its query (or fragment), in the form that cannot carry a token (`loggedPath`). */
function pathOf(req: IncomingMessage): string {
  // Express rewrites `req.url` under a mount point; `originalUrl` is what the client sent.
  const target = ('originalUrl' in req && typeof req.originalUrl === 'string' ? req.originalUrl : req.url) ?? '';
  const end = target.search(/[?#]/);
  return loggedPath(end === -1 ? target : target.slice(0, end));
}

interface HttpLogLine {
  readonly method: string;
  readonly path: string;
  readonly status: number;
  readonly code: string | undefined;
  readonly ms: number;
  /** Only when the connection closed before the answer was complete. */
  readonly aborted: true | undefined;
}

/**
 * When each request reached the plane: pino-http's own `responseTime` counts whole milliseconds
 * (Date.now), the data plane's `ms` hundredths; one field, one precision.
 */
const startedAt = new WeakMap<ServerResponse, number>();

function lineOf(req: IncomingMessage, res: ServerResponse, responseTime: number): HttpLogLine {
  const started = startedAt.get(res);
  return {
    method: req.method ?? '',
    path: pathOf(req),
    status: res.statusCode,
    code: problemCodeOf(res),
    ms: started === undefined ? responseTime : Math.round((performance.now() - started) * 100) / 100,
    aborted: res.writableEnded ? undefined : true,
  };
}

export function createHttpLog(logger: Logger): HttpLog {
  // Below `info` the line is never written: skip pino-http's two child loggers per request too.
  if (!logger.isLevelEnabled('info')) {
    return function httpLogOff(_req, _res, next) {
      next();
    };
  }
  const middleware = pinoHttp({
    logger,
    // The data plane's id, memoised per request: the line names the id the client was given.
    genReqId: (req) => requestIdOf(req),
    customAttributeKeys: { reqId: 'req_id' },
    // `req_id` as the only binding of `req.log`, instead of the whole serialised request.
    quietReqLogger: true,
    quietResLogger: true,
    // The raw objects reach the serializers (no std-serializer copy of the headers on the way),
    // and each returns nothing or a summary without headers: `req.log.info({ req })` logs no secret.
    wrapSerializers: false,
    serializers: {
      req: () => undefined,
      res: () => undefined,
      // An Error's own properties are where libraries keep payloads and commands: name and message
      // only. A plain `{ message }` is what this code base logs deliberately, and passes.
      err: (error: unknown) => (error instanceof Error ? { type: error.name, message: error.message } : error),
    },
    // Every answer at `info`, as on the data plane: a 5xx is one request among others here; what
    // went wrong is logged (without secrets) where it went wrong.
    useLevel: 'info',
    customSuccessMessage: () => MESSAGE,
    customErrorMessage: () => MESSAGE,
    customSuccessObject: (req, res, value: { responseTime: number }) => lineOf(req, res, value.responseTime),
    customErrorObject: (req, res, _error, value: { responseTime: number }) => lineOf(req, res, value.responseTime),
  });
  return function httpLog(req, res, next) {
    startedAt.set(res, performance.now());
    middleware(req, res, next);
  };
}
