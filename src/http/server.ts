/**
 * Both ports' HTTP servers, with what every request gets before its handler runs, wherever it
 * is going: the RFC 9112 §3.2 `Host` checks (`host-header.ts`), and problem+json answers where
 * Node would answer bare or not at all (`socket-answers.ts`). Each answer is logged.
 */
import { createServer, type RequestListener, type Server, type ServerOptions } from 'node:http';
import type { RequestLog } from '../observability/logger.js';
import { hostHeaderProblem } from './host-header.js';
import type { HttpLog } from './http-log.js';
import { writeProblem } from './problem.js';
import { requestIdOf } from './request-id.js';
import { answerClientError, refuseConnect } from './socket-answers.js';

export interface ServerLogs {
  /** The Express planes' request line: a refused Host is logged as they log. */
  readonly httpLog: HttpLog;
  /** The data plane's request line: for `CONNECT`, which has no response object. */
  readonly requestLog: RequestLog;
}

export function createHttpServer(handler: RequestListener, logs: ServerLogs, options: ServerOptions = {}): Server {
  // Node's own missing-Host check answers a bare 400; `hostHeaderProblem` covers it.
  const server = createServer({ ...options, requireHostHeader: false }, function checkHostThenHandle(req, res) {
    const problem = hostHeaderProblem(req);
    if (problem === undefined) return handler(req, res);
    logs.httpLog(req, res, () => writeProblem(res, problem, requestIdOf(req), { head: req.method === 'HEAD' }));
  });
  server.on('clientError', answerClientError);
  server.on('connect', refuseConnect(logs.requestLog));
  return server;
}
