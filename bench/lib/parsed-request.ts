/** In-process requests for the benchmarks that time the data plane without a socket. */
import { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';

/** A request as node's parser leaves it: raw header lines, headers not yet materialised. */
export function makeRequest(socket: Socket, url: string, rawHeaders: readonly string[]): IncomingMessage {
  const req = new IncomingMessage(socket);
  req.method = 'GET';
  req.url = url;
  req.httpVersionMajor = 1;
  req.httpVersionMinor = 1;
  req.httpVersion = '1.1';
  // What the HTTP parser calls (_http_common.js): the `headers` getters build from these lazily.
  (req as unknown as { _addHeaderLines(lines: string[], n: number): void })._addHeaderLines(
    [...rawHeaders],
    rawHeaders.length,
  );
  req.complete = true;
  return req;
}
