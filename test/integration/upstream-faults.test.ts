/**
 * Upstream failures (docs/clients.md#errors, seed §7): the sandbox's fault switch makes the system of record refuse,
 * stall, fail or answer garbage, and the proxy must turn each into its own problem+json answer
 * (503, 504, 502), pass the upstream's own 401/403/404/429 through unchanged, never leak what went
 * wrong inside, and serve the next request normally once the fault is gone.
 */
import { once } from 'node:events';
import { createServer as createHttpServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Faults } from '../../src/sandbox/faults.js';
import { NO_CACHE, type ProxyHandle, startProxy, startStack } from '../helpers/env.js';
import { getWithToken, type RawResponse } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';
import { freePort } from '../support/free-port.js';

const LIST = `${API_PREFIX}/receipts?per_page=3`;

interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly code: string;
  readonly detail: string;
  readonly request_id: string;
}

/** Every proxy-made error: problem+json, no-store, a request id, and nothing internal. */
function expectProblem(res: RawResponse, status: number, code: string, upstreamUrl: string): void {
  expect(res.status).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
  expect(res.headers['cache-control']).toBe('no-store');
  const problem = res.json() as Problem;
  expect(problem.code).toBe(code);
  expect(problem.status).toBe(status);
  expect(typeof problem.type).toBe('string');
  expect(typeof problem.title).toBe('string');
  expect(problem.request_id).toMatch(/^[A-Za-z0-9._:-]{1,128}$/);
  expect(problem.request_id).toBe(res.headers['x-request-id']);
  // What could leak: the upstream's address, library and system error text, stack frames.
  const upstream = new URL(upstreamUrl);
  const headerText = res.headerList
    .filter(([name]) => name !== 'x-request-id' && name !== 'date')
    .map(([n, v]) => `${n}: ${v}`)
    .join('\n');
  for (const text of [res.text.replace(problem.request_id, '<id>'), headerText]) {
    for (const leak of [
      upstream.host,
      `:${upstream.port}`,
      upstream.port,
      'http://',
      'Error:',
      '    at ',
      'undici',
      'UND_ERR',
      'ECONN',
      'ETIMEDOUT',
      'other side closed',
      'socket',
      'maxBodyBytes',
      'fault_',
    ]) {
      expect(text, `leaks ${leak}`).not.toContain(leak);
    }
  }
}

describe('upstream faults (timeout 0.3 s)', () => {
  let stack: Awaited<ReturnType<typeof startStack>>;
  let t: string;
  let recordTarget: string;

  beforeAll(async () => {
    stack = await startStack({ config: { ...NO_CACHE, upstream: { timeout: 0.3 } } });
    t = await token({ company: 1 });
    const record = (stack.sandbox.dataset.get('receipts') ?? []).find((r) => r.company_id === 1);
    if (record === undefined) throw new Error('no receipt of company 1');
    recordTarget = `${API_PREFIX}/receipts/${record.id}`;
  });
  afterAll(() => stack.close());

  async function expectRecovered(target = LIST, credential = t): Promise<void> {
    stack.sandbox.faults.clear();
    const res = await getWithToken(stack.proxy.url, target, credential);
    expect(res.status).toBe(200);
    const direct = await getWithToken(stack.sandbox.url, target, credential);
    expect(res.body.equals(direct.body)).toBe(true);
  }

  it('serves normally before any fault', async () => {
    await expectRecovered();
    await expectRecovered(recordTarget);
  });

  it.each([
    ['status 500', { status: 500 }, 'list'],
    ['status 502', { status: 502 }, 'list'],
    ['status 503', { status: 503, retryAfter: '5' }, 'list'],
    ['status 500 on a record', { status: 500 }, 'record'],
    ['a malformed body', { body: 'malformed' }, 'list'],
    ['a malformed body on a record', { body: 'malformed' }, 'record'],
    ['a truncated body', { body: 'truncated' }, 'list'],
    ['a truncated body on a record', { body: 'truncated' }, 'record'],
    ['a body that is not an object', { body: 'not-object' }, 'list'],
    ['a body that is not an object on a record', { body: 'not-object' }, 'record'],
  ] as const)('%s → 502 bad_gateway, then the next request succeeds', async (_label, fault: Faults, kind) => {
    const target = kind === 'list' ? LIST : recordTarget;
    stack.sandbox.faults.set(fault);
    const servedBefore = stack.sandbox.stats().served;
    const res = await getWithToken(stack.proxy.url, target, t);
    expectProblem(res, 502, 'bad_gateway', stack.sandbox.url);
    expect(res.headers['retry-after']).toBeUndefined();
    expect(stack.sandbox.stats().served).toBe(servedBefore + 1); // the proxy did ask the upstream
    await expectRecovered(target);
  });

  it('an upstream slower than the deadline → 504 upstream_timeout, before the upstream would have answered', async () => {
    const latencyMs = 1500;
    stack.sandbox.faults.set({ latencyMs });
    const servedBefore = stack.sandbox.stats().served;
    const startedAt = performance.now();
    const res = await getWithToken(stack.proxy.url, LIST, t);
    const elapsed = performance.now() - startedAt;
    expectProblem(res, 504, 'upstream_timeout', stack.sandbox.url);
    expect(stack.sandbox.stats().served).toBe(servedBefore + 1);
    expect(elapsed).toBeLessThan(latencyMs);
    await expectRecovered();
  });

  it('a refused connection → 503 upstream_unavailable; served again once the upstream listens', async () => {
    await expectRecovered(); // a pooled connection exists before the refusal
    const closed = once(stack.sandbox.server, 'close');
    const back = stack.sandbox.refuse(60_000); // until accept(): no timer to race
    await closed;
    try {
      const list = await getWithToken(stack.proxy.url, LIST, t);
      expectProblem(list, 503, 'upstream_unavailable', stack.sandbox.url);
      const record = await getWithToken(stack.proxy.url, recordTarget, t);
      expectProblem(record, 503, 'upstream_unavailable', stack.sandbox.url);
    } finally {
      stack.sandbox.accept();
      await back;
    }
    await expectRecovered();
  });

  it.each([
    ['seconds', '7', 'globex'],
    ['an HTTP date', 'Wed, 21 Oct 2026 07:28:00 GMT', 3],
  ])(
    'an upstream 429 is passed through with its body, Retry-After (%s) and Cache-Control: no-store',
    async (_label, retryAfter, company) => {
      // A company of its own: an upstream 429 pauses that company's upstream calls (docs/limits.md#the-upstream-guard).
      const credential = await token({ company });
      stack.sandbox.faults.set({ status: 429, retryAfter, times: 2 });
      const direct = await getWithToken(stack.sandbox.url, LIST, credential);
      const res = await getWithToken(stack.proxy.url, LIST, credential);
      expect(direct.status).toBe(429);
      expect(res.status).toBe(429);
      expect(res.body.equals(direct.body)).toBe(true);
      expect(res.headers['content-type']).toBe(direct.headers['content-type']);
      expect(res.headers['retry-after']).toBe(retryAfter);
      expect(res.headers['cache-control']).toBe('no-store');
      await expectRecovered();
    },
  );

  it.each([401, 403, 404])('an upstream %i is passed through with its status and body', async (status) => {
    // A token of its own: an upstream 401 may revoke the token it was sent with (docs/credentials.md).
    const credential = await token({ company: 1 });
    stack.sandbox.faults.set({ status, times: 2 });
    const direct = await getWithToken(stack.sandbox.url, recordTarget, credential);
    const res = await getWithToken(stack.proxy.url, recordTarget, credential);
    expect(direct.status).toBe(status);
    expect(res.status).toBe(status);
    expect(res.body.equals(direct.body)).toBe(true);
    expect(res.headers['content-type']).toBe(direct.headers['content-type']);
    if (status !== 404) expect(res.headers['cache-control']).toBe('no-store');
    await expectRecovered(recordTarget, await token({ company: 1 }));
  });

  it('a record of another company: the upstream’s 404 passed through', async () => {
    const other = await token({ company: 2 });
    const direct = await getWithToken(stack.sandbox.url, recordTarget, other);
    const res = await getWithToken(stack.proxy.url, recordTarget, other);
    expect(res.status).toBe(404);
    expect(res.body.equals(direct.body)).toBe(true);
  });
});

describe('upstream body over maxBodyBytes (2048)', () => {
  let stack: Awaited<ReturnType<typeof startStack>>;
  let t: string;

  beforeAll(async () => {
    stack = await startStack({ config: { ...NO_CACHE, upstream: { maxBodyBytes: 2048 } } });
    t = await token({ company: 1 });
  });
  afterAll(() => stack.close());

  it('a page over the cap → 502 bad_gateway; a page under it is served; the pool recovers', async () => {
    const big = `${API_PREFIX}/receipts?per_page=100`;
    const direct = await getWithToken(stack.sandbox.url, big, t);
    expect(direct.status).toBe(200);
    expect(direct.body.length).toBeGreaterThan(2048);
    const res = await getWithToken(stack.proxy.url, big, t);
    expectProblem(res, 502, 'bad_gateway', stack.sandbox.url);

    const small = `${API_PREFIX}/receipts?per_page=1`;
    const smallDirect = await getWithToken(stack.sandbox.url, small, t);
    expect(smallDirect.body.length).toBeLessThanOrEqual(2048);
    const ok = await getWithToken(stack.proxy.url, small, t);
    expect(ok.status).toBe(200);
    expect(ok.body.equals(smallDirect.body)).toBe(true);
  });
});

describe('an upstream that is not listening at all', () => {
  let proxy: ProxyHandle;
  let upstreamUrl: string;
  let t: string;

  beforeAll(async () => {
    upstreamUrl = `http://127.0.0.1:${await freePort()}`;
    proxy = await startProxy({ upstreamUrl, config: NO_CACHE });
    t = await token({ company: 1 });
  });
  afterAll(() => proxy.close());

  it.each([`${API_PREFIX}/receipts`, `${API_PREFIX}/warehouses?code=MAIN`, `${API_PREFIX}/movements/1234567`])(
    '%s → 503 upstream_unavailable without the upstream address',
    async (target) => {
      const res = await getWithToken(proxy.url, target, t);
      expectProblem(res, 503, 'upstream_unavailable', upstreamUrl);
    },
  );
});

/**
 * The sandbox's `malformed` fault is one way to send a bad body; these are sent whole and correctly
 * framed by a stub, so that only the proxy's reading of the body is under test.
 */
describe('200 answers that are not what the seed promises (stub upstream)', () => {
  const BODIES: Readonly<Record<string, string>> = {
    'unterminated-json': '{"data": [',
    html: '<html><body>maintenance</body></html>',
    'json-null': 'null',
    'json-string': '"data"',
    'json-array': '[{"id": 1}]',
    'list-data-not-array': '{"data": {}, "meta": {}}',
    'list-meta-missing': '{"data": []}',
    'list-meta-array': '{"data": [], "meta": []}',
    empty: '',
  };
  let stub: Server;
  let proxy: ProxyHandle;
  let stubUrl: string;
  let t: string;
  let current = '';

  beforeAll(async () => {
    stub = createHttpServer((req, res) => {
      const body = Buffer.from(
        BODIES[current] ?? '{"data": [], "meta": {"per_page": 30, "has_more": false, "next_after_id": null}}',
      );
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      res.end(req.method === 'HEAD' ? undefined : body);
    });
    stub.listen(0, '127.0.0.1');
    await once(stub, 'listening');
    stubUrl = `http://127.0.0.1:${(stub.address() as AddressInfo).port}`;
    proxy = await startProxy({ upstreamUrl: stubUrl, config: NO_CACHE });
    t = await token({ company: 1 });
  });
  afterAll(async () => {
    await proxy.close();
    stub.closeAllConnections();
    stub.close();
    await once(stub, 'close');
  });

  it.each(Object.keys(BODIES))(
    'a complete 200 list body that is %s → 502 bad_gateway, then served again',
    async (name) => {
      current = name;
      const res = await getWithToken(proxy.url, LIST, t);
      expectProblem(res, 502, 'bad_gateway', stubUrl);
      current = '';
      const ok = await getWithToken(proxy.url, LIST, t);
      expect(ok.status).toBe(200);
    },
  );

  it('a record body must be a JSON object too', async () => {
    current = 'json-array';
    const res = await getWithToken(proxy.url, `${API_PREFIX}/receipts/7`, t);
    expectProblem(res, 502, 'bad_gateway', stubUrl);
    current = '';
  });
});
