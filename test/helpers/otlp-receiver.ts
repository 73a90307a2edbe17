/**
 * An in-process OTLP/HTTP collector for the tracing tests: it records every request it gets and
 * answers each `200 {}`, as a collector accepting the export does.
 */
import { once } from 'node:events';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedExport {
  readonly method: string;
  readonly url: string;
  readonly contentType: string | undefined;
  readonly body: Buffer;
}

export interface OtlpReceiver {
  /** `http://127.0.0.1:<port>`: the endpoint to export to. */
  readonly url: string;
  /** What it has received, in order. */
  readonly received: ReceivedExport[];
  close(): Promise<void>;
}

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const received: ReceivedExport[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        method: req.method ?? '',
        url: req.url ?? '',
        contentType: req.headers['content-type'],
        body: Buffer.concat(chunks),
      });
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{}');
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
    received,
    async close() {
      server.close();
      await once(server, 'close');
    },
  };
}
