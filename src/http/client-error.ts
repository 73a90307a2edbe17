/**
 * Requests Node's parser refuses before any handler runs (an unknown method, a malformed request
 * line, oversized headers) would get Node's bare `400 Bad Request`. They get a problem+json body
 * like every other error instead, then the connection is closed: the parser's state is unknown.
 */
import { randomUUID } from 'node:crypto';
import type { Socket } from 'node:net';
import { InvalidRequestError, RequestHeadersTooLargeError, type ProxyError } from '../errors/proxy-error.js';
import { problemBody } from './problem.js';

export function answerClientError(error: Error & { code?: string }, socket: Socket): void {
  if (!socket.writable || error.code === 'ECONNRESET') {
    socket.destroy();
    return;
  }
  const problem: ProxyError =
    error.code === 'HPE_HEADER_OVERFLOW' ? new RequestHeadersTooLargeError() : new InvalidRequestError('The request could not be parsed.');
  const body = problemBody(problem, randomUUID());
  socket.end(
    `HTTP/1.1 ${problem.status} ${problem.status === 431 ? 'Request Header Fields Too Large' : 'Bad Request'}\r\n` +
      'Content-Type: application/problem+json\r\n' +
      `Content-Length: ${body.length}\r\n` +
      'Cache-Control: no-store\r\n' +
      'Connection: close\r\n\r\n' +
      body.toString('utf8'),
  );
}
