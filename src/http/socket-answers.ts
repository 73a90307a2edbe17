/**
 * Answers written straight to the socket, where Node hands over no `ServerResponse`: every other
 * error is problem+json, so these are too, and the connection is closed after them.
 *
 * - Requests Node's parser refuses before any handler runs (an unknown method, a malformed
 *   request line, oversized headers) would get Node's bare `400 Bad Request`; the parser's state
 *   is unknown afterwards.
 * - `CONNECT` never reaches a request handler: Node emits `'connect'` and, with no listener,
 *   drops the connection without a word. It gets the 405 every other method gets (RFC 9110
 *   §15.5.6: with `Allow`); no tunnel is opened, and whatever the client sent after the head is
 *   never read.
 */
import { type IncomingMessage, STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  InvalidRequestError,
  MethodNotAllowedError,
  type ProxyError,
  RequestHeadersTooLargeError,
} from '../errors/proxy-error.js';
import type { RequestLog } from '../observability/logger.js';
import { problemBody } from './problem.js';
import { newRequestId, requestIdOf } from './request-id.js';

/** Logged in place of a `CONNECT` target: authority-form, it names a host, or anything a client typed. */
const CONNECT_PATH = '(authority-form)';

function writeRawProblem(socket: Duplex, problem: ProxyError, requestId: string): void {
  const body = problemBody(problem, requestId);
  const headers: Record<string, string | number> = {
    'Content-Type': 'application/problem+json',
    'Content-Length': body.length,
    'Cache-Control': 'no-store',
    'X-Request-Id': requestId,
    ...problem.headers,
    Connection: 'close',
  };
  const head = Object.entries(headers)
    .map(([name, value]) => `${name}: ${String(value)}\r\n`)
    .join('');
  socket.end(`HTTP/1.1 ${problem.status} ${STATUS_CODES[problem.status] ?? ''}\r\n${head}\r\n${body.toString('utf8')}`);
}

/** `server.on('clientError', answerClientError)`. */
export function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  if (!socket.writable || error.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const problem: ProxyError =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? new RequestHeadersTooLargeError()
      : new InvalidRequestError('The request could not be parsed.');
  writeRawProblem(socket, problem, newRequestId());
}

/** `server.on('connect', refuseConnect(log))`: 405, logged like every other answer. */
export function refuseConnect(log: RequestLog): (req: IncomingMessage, socket: Duplex) => void {
  return function answerConnect(req, socket) {
    const startedAt = performance.now();
    const problem = new MethodNotAllowedError();
    const requestId = requestIdOf(req);
    if (socket.writable) writeRawProblem(socket, problem, requestId);
    else socket.destroy();
    log({
      requestId,
      method: 'CONNECT',
      path: CONNECT_PATH,
      resource: undefined,
      status: problem.status,
      errorCode: problem.code,
      company: undefined,
      subject: undefined,
      cache: undefined,
      upstreamMs: undefined,
      durationMs: performance.now() - startedAt,
    });
  };
}
