/**
 * A stub system of record for the suites that judge what reaches the upstream: it records every
 * request (method, target, headers as parsed and raw, body, and which connection carried it) and
 * answers each as the suite's `answer` says.
 */
import { once } from 'node:events';
import { createServer, type IncomingHttpHeaders, type OutgoingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

export interface StubRequest {
  readonly method: string;
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
  /** Every header line as sent, name and value alternating (to see duplicates and order). */
  readonly rawHeaders: readonly string[];
  readonly body: Buffer;
  /** Which upstream connection carried it: numbered from 1 in the order they were opened. */
  readonly connection: number;
}

export interface StubAnswer {
  readonly status: number;
  readonly headers?: OutgoingHttpHeaders;
  /** Sent with its `content-length`; none for a 304. */
  readonly body?: string | Buffer;
}

export interface StubUpstream {
  readonly url: string;
  readonly received: StubRequest[];
  /** Connections opened so far. */
  connections(): number;
  close(): Promise<void>;
}

export async function startStubUpstream(answer: (request: StubRequest) => StubAnswer): Promise<StubUpstream> {
  const received: StubRequest[] = [];
  const ids = new WeakMap<Socket, number>();
  let connections = 0;
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const request: StubRequest = {
        method: req.method ?? '',
        url: req.url ?? '',
        headers: req.headers,
        rawHeaders: req.rawHeaders,
        body: Buffer.concat(chunks),
        connection: ids.get(req.socket) ?? -1,
      };
      received.push(request);
      const { status, headers = {}, body } = answer(request);
      const bytes = body === undefined ? undefined : Buffer.from(body);
      res.writeHead(status, bytes === undefined ? headers : { ...headers, 'content-length': bytes.length });
      res.end(bytes);
    });
  });
  server.on('connection', (socket: Socket) => {
    connections += 1;
    ids.set(socket, connections);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
    received,
    connections: () => connections,
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}
