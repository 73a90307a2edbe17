/**
 * The Express planes' request line (docs/operations.md#logs): one JSON line per request with the data plane's
 * field names, the id the client was given, the problem `code`, and nothing from the headers or
 * the query; nothing at all below `info`.
 */
import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { Writable } from 'node:stream';
import express from 'express';
import type { LevelWithSilent } from 'pino';
import { afterEach, describe, expect, it } from 'vitest';
import { createHttpLog } from '../../src/http/http-log.js';
import { requestIdOf } from '../../src/http/request-id.js';
import { createLogger } from '../../src/observability/logger.js';
import { createFallbackApp } from '../../src/planes/fallback-app.js';
import { send } from '../helpers/http.js';

const SECRET = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJjYW5hcnkifQ.c2VjcmV0LXNpZ25hdHVyZS1jYW5hcnk';

interface Capture {
  readonly lines: () => Array<Record<string, unknown>>;
  readonly text: () => string;
  readonly destination: Writable;
  /** Resolves at the next line written. */
  readonly next: () => Promise<void>;
}

function capture(): Capture {
  const chunks: string[] = [];
  const waiting: Array<() => void> = [];
  const destination = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      chunks.push(chunk.toString('utf8'));
      for (const resolve of waiting.splice(0)) resolve();
      callback();
    },
  });
  const text = (): string => chunks.join('');
  return {
    destination,
    text,
    next: () => new Promise((resolve) => waiting.push(resolve)),
    lines: () =>
      text()
        .split('\n')
        .filter((line) => line.length > 0)
        .map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}

let servers: Server[] = [];
afterEach(async () => {
  await Promise.all(
    servers.map(async (server) => {
      server.close();
      await once(server, 'close');
    }),
  );
  servers = [];
});

async function serve(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<string> {
  const server = createServer(handler);
  servers.push(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

async function fallbackAt(level: LevelWithSilent): Promise<{ url: string; log: Capture }> {
  const log = capture();
  const url = await serve(createFallbackApp(undefined, createHttpLog(createLogger(level, log.destination))));
  return { url, log };
}

describe('createHttpLog on the fallback plane', () => {
  it('writes one line with the data plane field names, the answered id and the problem code', async () => {
    const { url, log } = await fallbackAt('info');
    const res = await send(url, `/nowhere/${'x'.repeat(10)}?access_token=${SECRET}&q=1`, {
      headers: [
        ['Authorization', `Bearer ${SECRET}`],
        ['Cookie', `session=${SECRET}`],
        ['X-Api-Key', SECRET],
      ],
    });
    expect(res.status).toBe(404);
    const lines = log.lines();
    expect(lines).toHaveLength(1);
    const line = lines[0] ?? {};
    expect(line).toMatchObject({
      level: 30,
      msg: 'request',
      method: 'GET',
      path: '/nowhere/xxxxxxxxxx',
      status: 404,
      code: 'not_found',
    });
    expect(line.req_id).toBe(res.headers['x-request-id']);
    expect(line.req_id).toBe((res.json() as { request_id: string }).request_id);
    expect(typeof line.ms).toBe('number');
    expect(Object.keys(line).sort()).toEqual([
      'code',
      'level',
      'method',
      'ms',
      'msg',
      'path',
      'req_id',
      'status',
      'time',
    ]);
    expect(log.text()).not.toContain(SECRET.split('.')[2]);
    expect(log.text()).not.toContain('access_token');
  });

  it("keeps a client's plausible X-Request-Id and replaces an implausible one", async () => {
    const { url, log } = await fallbackAt('info');
    const kept = await send(url, '/a', { headers: [['X-Request-Id', 'trace-42.a:b']] });
    const replaced = await send(url, '/b', { headers: [['X-Request-Id', `Bearer ${SECRET}`]] });
    expect(kept.headers['x-request-id']).toBe('trace-42.a:b');
    expect(replaced.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(log.lines().map((line) => line.req_id)).toEqual(['trace-42.a:b', replaced.headers['x-request-id']]);
    expect(log.text()).not.toContain(SECRET.split('.')[2]);
  });

  it('logs a HEAD and an answer without a problem without a code', async () => {
    const log = capture();
    const app = express();
    app.use(createHttpLog(createLogger('info', log.destination)));
    app.get('/ok', (_req, res) => {
      res.json({ ok: true });
    });
    const url = await serve(app);
    expect((await send(url, '/ok?x=1')).status).toBe(200);
    expect((await send(url, '/missing', { method: 'HEAD' })).status).toBe(404);
    const [ok, head] = log.lines();
    expect(ok).toMatchObject({ method: 'GET', path: '/ok', status: 200 });
    expect(ok).not.toHaveProperty('code');
    expect(head).toMatchObject({ method: 'HEAD', path: '/missing', status: 404 });
  });

  it('marks an answer the client did not wait for as aborted', async () => {
    const log = capture();
    let arrived: () => void = () => undefined;
    const requestArrived = new Promise<void>((resolve) => {
      arrived = resolve;
    });
    const app = express();
    app.use(createHttpLog(createLogger('info', log.destination)));
    app.get('/slow', () => arrived()); // never answers
    const url = await serve(app);
    const socket = connect(Number(new URL(url).port), '127.0.0.1');
    socket.write('GET /slow?k=v HTTP/1.1\r\nHost: x\r\n\r\n');
    await requestArrived;
    const written = log.next();
    socket.destroy();
    await written;
    expect(log.lines()).toMatchObject([{ method: 'GET', path: '/slow', aborted: true }]);
  });

  it('logs the path word by word like the data plane: a token, a long segment or a deep path is cut', async () => {
    const { url, log } = await fallbackAt('info');
    await send(url, `/${'p'.repeat(1000)}`);
    await send(url, `/files/${SECRET}/raw`);
    await send(url, `/${'a/'.repeat(40)}end`);
    expect(log.lines().map((line) => line.path)).toEqual([
      '/{redacted}',
      '/files/{redacted}/raw',
      `/${'a/'.repeat(12)}{redacted}`,
    ]);
    expect(log.text()).not.toContain(SECRET.split('.')[2]);
  });

  it.each(['warn', 'silent'] as const)('writes nothing at %s and passes every request on', async (level) => {
    const { url, log } = await fallbackAt(level);
    const res = await send(url, '/nowhere');
    expect(res.status).toBe(404);
    expect((res.json() as { code: string }).code).toBe('not_found');
    expect(log.text()).toBe('');
  });
});

describe('requestIdOf', () => {
  it('gives one request the same generated id every time it is asked', async () => {
    const ids: string[][] = [];
    const url = await serve((req, res) => {
      ids.push([requestIdOf(req), requestIdOf(req)]);
      res.end();
    });
    await send(url, '/');
    await send(url, '/');
    const [first, second] = ids;
    expect(first?.[0]).toBe(first?.[1]);
    expect(second?.[0]).toBe(second?.[1]);
    expect(first?.[0]).not.toBe(second?.[0]);
  });
});
