/**
 * The opt-in pass-through (docs/configuration.md#pass-through): off by default (everything that is not one of the 26 reads is
 * a 404 from the proxy); with `upstream.passthrough: true`, every other request goes to the upstream
 * untouched over pooled connections, while the 26 reads keep the proxy's own handling and hostile
 * request targets never leave the proxy.
 */
import { once } from 'node:events';
import { type IncomingHttpHeaders, request } from 'node:http';
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { type ProxyHandle, startProxy } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { type StubRequest, type StubUpstream, startStubUpstream } from '../helpers/stub-upstream.js';
import { token } from '../helpers/tokens.js';
import { freePort } from '../support/free-port.js';

/** A stub upstream: records every request; answers a valid list envelope that echoes the request. */
function startStub(): Promise<StubUpstream> {
  return startStubUpstream((req) => ({
    status: req.method === 'POST' ? 201 : 200,
    headers: { 'content-type': 'application/json', 'x-stub': 'yes' },
    body: JSON.stringify({ data: [], meta: {}, echo: `${req.method} ${req.url}`, length: req.body.length }),
  }));
}

interface Answer {
  readonly status: number;
  readonly headers: IncomingHttpHeaders;
  readonly body: Buffer;
}

/**
 * One request on its own connection with `Connection: close`, read by HTTP framing (a client that
 * does not need the server to close the connection to find the end of the answer).
 */
function exchange(
  baseUrl: string,
  path: string,
  options: { method?: string; headers?: Record<string, string>; body?: string } = {},
): Promise<Answer> {
  const url = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const req = request(
      {
        host: url.hostname,
        port: Number(url.port),
        path,
        method: options.method ?? 'GET',
        agent: false,
        headers: { connection: 'close', ...options.headers },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () =>
          resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }),
        );
        res.on('error', reject);
      },
    );
    req.setTimeout(10_000, () => req.destroy(new Error(`timeout: ${path}`)));
    req.on('error', reject);
    req.end(options.body);
  });
}

function expectProblem(res: RawResponse | Answer, status: number, code: string): void {
  expect(res.status).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
  expect(res.headers['cache-control']).toBe('no-store');
  const problem = JSON.parse(res.body.toString('utf8')) as { code: string; status: number; request_id: string };
  expect(problem.code).toBe(code);
  expect(problem.status).toBe(status);
  expect(problem.request_id).toBe(res.headers['x-request-id']);
}

describe('pass-through off (the default)', () => {
  let stub: StubUpstream;
  let proxy: ProxyHandle;
  let t: string;

  beforeAll(async () => {
    stub = await startStub();
    proxy = await startProxy({ upstreamUrl: stub.url });
    t = await token({ company: 1 });
  });
  afterAll(async () => {
    await proxy.close();
    await stub.close();
  });

  it.each([
    ['GET', '/other/path?x=1'],
    ['POST', '/other/path'],
    ['GET', '/'],
    ['GET', API_PREFIX],
    ['GET', '/api/slab/v2/operations/receipts'],
  ])('%s %s outside the API → 404 not_found from the proxy; the upstream sees nothing', async (method, target) => {
    const res = await send(proxy.url, target, {
      method,
      headers: [['Authorization', `Bearer ${t}`]],
      ...(method === 'POST' && { body: '{}' }),
    });
    expectProblem(res, 404, 'not_found');
    expect(stub.received).toEqual([]);
  });

  it.each(['not-a-resource', 'Receipts', 'receipt%73', 'not-a-resource/7'])(
    'an unknown resource under the prefix (%s) with a valid token → 404 not_found; the upstream sees nothing',
    async (path) => {
      const res = await getWithToken(proxy.url, `${API_PREFIX}/${path}`, t);
      expectProblem(res, 404, 'not_found');
      expect(stub.received).toEqual([]);
    },
  );

  it('an unknown resource under the prefix without a token → 401 first', async () => {
    const res = await send(proxy.url, `${API_PREFIX}/not-a-resource`);
    expectProblem(res, 401, 'unauthenticated');
    expect(stub.received).toEqual([]);
  });
});

describe('pass-through on', () => {
  let stub: StubUpstream;
  let proxy: ProxyHandle;
  let t: string;

  beforeAll(async () => {
    stub = await startStub();
    proxy = await startProxy({ upstreamUrl: stub.url, config: { upstream: { passthrough: true } } });
    t = await token({ company: 1 });
  });
  afterAll(async () => {
    await proxy.close();
    await stub.close();
  });

  /** Runs `act` and returns what the stub received meanwhile. */
  async function upstreamDuring(act: () => Promise<unknown>): Promise<StubRequest[]> {
    const before = stub.received.length;
    await act();
    return stub.received.slice(before);
  }

  it.each([
    ['GET', '/other/path?x=1&y=%20+&z&x=2', undefined],
    ['GET', '/reports/2026/summary.csv', undefined],
    ['POST', '/other/orders?dry_run=true', '{"slab_id": 7, "note": "ünïcode & more"}'],
    ['PATCH', '/other/orders/7', '{"status":"done"}'],
    ['DELETE', '/other/orders/7', undefined],
    ['GET', `${API_PREFIX}/not-a-resource?per_page=1000&x=%zz`, undefined],
    ['GET', `${API_PREFIX}/not-a-resource/7/children`, undefined],
    ['POST', `${API_PREFIX}/not-a-resource`, '{"a":1}'],
  ])('%s %s reaches the upstream untouched, and its answer the client', async (method, target, body) => {
    let answer: Answer | undefined;
    const seen = await upstreamDuring(async () => {
      answer = await exchange(proxy.url, target, {
        method,
        headers: { authorization: `Bearer ${t}`, 'content-type': 'application/json', 'x-client': 'kept' },
        ...(body !== undefined && { body }),
      });
    });
    expect(seen.length).toBe(1);
    const upstream = seen[0] as StubRequest;
    expect(upstream.method).toBe(method);
    expect(upstream.url).toBe(target);
    expect(upstream.body.toString('utf8')).toBe(body ?? '');
    expect(upstream.headers.authorization).toBe(`Bearer ${t}`);
    expect(upstream.headers['x-client']).toBe('kept');
    expect(answer?.status).toBe(method === 'POST' ? 201 : 200);
    expect(answer?.headers['x-stub']).toBe('yes');
    expect(JSON.parse(answer?.body.toString('utf8') ?? '{}')).toMatchObject({ echo: `${method} ${target}` });
  });

  it('does not forward the client’s Connection: close', async () => {
    const seen = await upstreamDuring(() => exchange(proxy.url, '/other/path', { headers: { connection: 'close' } }));
    expect(seen.length).toBe(1);
    expect(String(seen[0]?.headers.connection ?? '')).not.toMatch(/close/i);
  });

  it('reuses upstream connections across sequential requests from clients that send Connection: close', async () => {
    const seen = await upstreamDuring(async () => {
      for (let i = 0; i < 6; i++) {
        const res = await exchange(proxy.url, `/other/sequence/${i}`, { headers: { connection: 'close' } });
        expect(res.status).toBe(200);
      }
    });
    expect(seen.map((r) => r.url)).toEqual([0, 1, 2, 3, 4, 5].map((i) => `/other/sequence/${i}`));
    expect(new Set(seen.map((r) => r.connection)).size).toBe(1);
  });

  it('honours the client’s Connection: close: answers `connection: close` and closes the client connection', async () => {
    const host = new URL(proxy.url);
    const socket = connect(Number(host.port), host.hostname);
    await once(socket, 'connect');
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.write(`GET /other/closing HTTP/1.1\r\nHost: ${host.host}\r\nConnection: close\r\n\r\n`);
    // The server must close after its answer (RFC 9112 §9.6). Bounded, so a failure is quick.
    const guard = AbortSignal.timeout(1_500);
    const closedByServer = await once(socket, 'end', { signal: guard }).then(
      () => true,
      () => false,
    );
    socket.destroy();
    const raw = Buffer.concat(chunks).toString('latin1');
    const head = raw.slice(0, raw.indexOf('\r\n\r\n')).toLowerCase();
    expect(head).toMatch(/^http\/1\.1 200/);
    expect(head).toMatch(/\r\nconnection: close(\r\n|$)/);
    expect(head).not.toMatch(/\r\nkeep-alive:/);
    expect(closedByServer).toBe(true);
  });

  it('still authenticates the 26 reads itself: no token → 401 from the proxy', async () => {
    const seen = await upstreamDuring(async () => {
      const res = await send(proxy.url, `${API_PREFIX}/receipts`);
      expectProblem(res, 401, 'unauthenticated');
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    });
    expect(seen).toEqual([]);
  });

  it.each([
    ['POST', `${API_PREFIX}/receipts`],
    ['PUT', `${API_PREFIX}/receipts/5`],
    ['DELETE', `${API_PREFIX}/receipts/5`],
    ['PATCH', `${API_PREFIX}/warehouses`],
  ])('%s %s (a known resource) → 405 from the proxy, not passed through', async (method, target) => {
    const seen = await upstreamDuring(async () => {
      const res = await send(proxy.url, target, { method, headers: [['Authorization', `Bearer ${t}`]], body: '{}' });
      expectProblem(res, 405, 'method_not_allowed');
      expect(res.headers.allow).toBe('GET, HEAD, OPTIONS');
    });
    expect(seen).toEqual([]);
  });

  it('POST to a known resource without a token → 401 (401 comes first), not passed through', async () => {
    const seen = await upstreamDuring(async () => {
      const res = await send(proxy.url, `${API_PREFIX}/receipts`, { method: 'POST', body: '{}' });
      expectProblem(res, 401, 'unauthenticated');
    });
    expect(seen).toEqual([]);
  });

  it('OPTIONS on a known resource → 204 from the proxy with Allow', async () => {
    const seen = await upstreamDuring(async () => {
      const res = await send(proxy.url, `${API_PREFIX}/receipts`, { method: 'OPTIONS' });
      expect(res.status).toBe(204);
      expect(res.headers.allow).toBe('GET, HEAD, OPTIONS');
    });
    expect(seen).toEqual([]);
  });

  it.each([
    ['a malformed id', 404, 'not_found', `${API_PREFIX}/receipts/abc`],
    ['extra segments', 404, 'not_found', `${API_PREFIX}/receipts/5/children`],
    ['an unknown parameter', 400, 'invalid_parameter', `${API_PREFIX}/receipts?bogus=1`],
    ['a token in the query', 400, 'invalid_request', `${API_PREFIX}/receipts?access_token=abc`],
  ])('a known resource with %s → %i %s from the proxy, not passed through', async (_label, status, code, target) => {
    const seen = await upstreamDuring(async () => {
      const res = await getWithToken(proxy.url, target, t);
      expectProblem(res, status, code);
    });
    expect(seen).toEqual([]);
  });

  it('a valid read is served by the data plane: canonical target, only the allowed headers', async () => {
    const seen = await upstreamDuring(async () => {
      const res = await getWithToken(proxy.url, `${API_PREFIX}/receipts?warehouse_id=1&per_page=5`, t, {
        headers: [['Cookie', 'a=b']],
      });
      expect(res.status).toBe(200);
      expect(res.headers.vary).toBe('Accept-Encoding, Authorization');
    });
    expect(seen.map((r) => r.url)).toEqual([`${API_PREFIX}/receipts?per_page=5&warehouse_id=1`]);
    expect(seen[0]?.headers.cookie).toBeUndefined();
  });

  it.each([
    'http://evil.example/other/path',
    `http://evil.example${API_PREFIX}/receipts`,
    'http://127.0.0.1/other/path',
    '//evil.example/other/path',
    `//evil.example${API_PREFIX}/receipts`,
  ])('the target %s → 400 invalid_request; it never reaches the upstream', async (target) => {
    const seen = await upstreamDuring(async () => {
      const res = await send(proxy.url, target, { headers: [['Authorization', `Bearer ${t}`]] });
      expectProblem(res, 400, 'invalid_request');
    });
    expect(seen).toEqual([]);
  });
});

describe('pass-through on, upstream refusing connections', () => {
  let proxy: ProxyHandle;
  let upstreamUrl: string;

  beforeAll(async () => {
    upstreamUrl = `http://127.0.0.1:${await freePort()}`;
    proxy = await startProxy({ upstreamUrl, config: { upstream: { passthrough: true } } });
  });
  afterAll(() => proxy.close());

  it.each([
    ['GET', '/other/path'],
    ['POST', '/other/orders'],
    ['GET', `${API_PREFIX}/not-a-resource`],
  ])('%s %s → 503 upstream_unavailable problem+json', async (method, target) => {
    const res = await exchange(proxy.url, target, { method, ...(method === 'POST' && { body: '{}' }) });
    expectProblem(res, 503, 'upstream_unavailable');
    const text = res.body.toString('utf8');
    for (const leak of [new URL(upstreamUrl).port, 'ECONNREFUSED', 'Error', '    at '])
      expect(text).not.toContain(leak);
  });
});
