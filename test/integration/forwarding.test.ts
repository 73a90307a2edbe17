/**
 * What reaches the upstream (docs/clients.md#request-rules): exactly the canonical request the proxy keyed, with no
 * client header but the credential (re-spelled), `Accept` and `X-Request-Id`. A stub upstream
 * records the method, target, raw headers and body of every request it receives.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { NO_CACHE, type ProxyHandle, startProxy } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { type StubRequest, type StubUpstream, startStubUpstream } from '../helpers/stub-upstream.js';
import { token } from '../helpers/tokens.js';

const MISSING_RECORD_ID = '404404';
const LIST_BODY = JSON.stringify({ data: [], meta: { per_page: 30, has_more: false, next_after_id: null } });
const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

/** A stub system of record: records each request; answers a list page, a record, or a 404. */
function startStub(): Promise<StubUpstream> {
  return startStubUpstream((req) => {
    const path = req.url.split('?')[0] ?? '';
    const isRecord = /\/[^/]+\/[0-9]+$/.test(path);
    const [status, body] = !isRecord
      ? [200, LIST_BODY]
      : path.endsWith(`/${MISSING_RECORD_ID}`)
        ? [404, '{"error":"not_found"}']
        : [200, '{"data":{}}'];
    return { status, headers: { 'content-type': 'application/json' }, body };
  });
}

/** Header name (lower case) → every value received under it. */
function headersOf(request: StubRequest): Map<string, string[]> {
  const map = new Map<string, string[]>();
  for (let i = 0; i < request.rawHeaders.length; i += 2) {
    const name = (request.rawHeaders[i] as string).toLowerCase();
    map.set(name, [...(map.get(name) ?? []), request.rawHeaders[i + 1] as string]);
  }
  return map;
}

describe('forwarding to the upstream', () => {
  let stub: StubUpstream;
  let proxy: ProxyHandle;
  let t: string;

  beforeAll(async () => {
    stub = await startStub();
    proxy = await startProxy({ upstreamUrl: stub.url, config: NO_CACHE });
    t = await token({ company: 1 });
  });
  afterAll(async () => {
    await proxy.close();
    await stub.close();
  });

  /** Sends through the proxy and returns the client's answer and the one request the stub got. */
  async function forward(target: string, options: Parameters<typeof send>[2] = {}) {
    const before = stub.received.length;
    const res = await send(proxy.url, target, {
      ...options,
      headers: [['Authorization', `Bearer ${t}`], ...(options.headers ?? [])],
    });
    expect(stub.received.length - before, `upstream requests for ${target}`).toBe(1);
    return { res, upstream: stub.received[before] as StubRequest };
  }

  it('sends only Authorization (re-spelled), Accept and X-Request-Id, plus transport headers', async () => {
    const before = stub.received.length;
    const res = await send(proxy.url, `${API_PREFIX}/receipts`, {
      headers: [
        ['authorization', `bEaReR   ${t}`],
        ['Cookie', 'session=abc; admin=1'],
        ['X-Forwarded-Host', 'evil.example'],
        ['X-Forwarded-For', '203.0.113.9'],
        ['X-Forwarded-Proto', 'https'],
        ['Forwarded', 'for=203.0.113.9;host=evil.example'],
        ['X-Original-URL', '/admin'],
        ['X-Rewrite-URL', '/admin'],
        ['X-HTTP-Method-Override', 'DELETE'],
        ['X-Real-IP', '203.0.113.9'],
        ['Accept-Encoding', 'gzip, br'],
        ['Accept', 'text/html'],
        ['Accept-Language', 'de'],
        ['User-Agent', 'curious-client/1.0'],
        ['Origin', 'https://evil.example'],
        ['Referer', 'https://evil.example/page'],
        ['Range', 'bytes=0-10'],
        ['If-None-Match', '"abc"'],
        ['If-Modified-Since', 'Wed, 21 Oct 2015 07:28:00 GMT'],
        ['Cache-Control', 'no-cache'],
        ['Pragma', 'no-cache'],
        ['Proxy-Authorization', 'Basic Zm9vOmJhcg=='],
        ['Via', '1.1 other-proxy'],
        ['Content-Type', 'application/json'],
        ['X-Custom-Tenant', '2'],
        ['X-Request-Id', 'client-trace-1'],
      ],
    });
    expect(res.status).toBe(200);
    expect(stub.received.length - before).toBe(1);
    const headers = headersOf(stub.received[before] as StubRequest);
    const allowed = new Set(['authorization', 'accept', 'x-request-id', 'host', 'connection']);
    expect([...headers.keys()].filter((name) => !allowed.has(name))).toEqual([]);
    expect(headers.get('authorization')).toEqual([`Bearer ${t}`]);
    expect(headers.get('accept')).toEqual(['application/json']);
    expect(headers.get('x-request-id')).toEqual(['client-trace-1']);
    // The upstream's own host, never the client's Host or X-Forwarded-Host.
    expect(headers.get('host')).toEqual([new URL(stub.url).host]);
  });

  it.each([
    [
      '`;` does not split a value',
      '/fulfilments?status=a;per_page=100',
      '/fulfilments?per_page=30&status=a%3Bper_page%3D100',
    ],
    ['per_page absent', '/receipts', '/receipts?per_page=30'],
    ['per_page=30', '/receipts?per_page=30', '/receipts?per_page=30'],
    ['per_page=%33%30', '/receipts?per_page=%33%30', '/receipts?per_page=30'],
    ['order one', '/receipts?warehouse_id=5&per_page=10&after_id=3', '/receipts?after_id=3&per_page=10&warehouse_id=5'],
    ['order two', '/receipts?after_id=3&warehouse_id=5&per_page=10', '/receipts?after_id=3&per_page=10&warehouse_id=5'],
    [
      'order three',
      '/receipts?per_page=10&after_id=3&warehouse_id=5',
      '/receipts?after_id=3&per_page=10&warehouse_id=5',
    ],
    ['empty pairs dropped', '/receipts?&warehouse_id=5&&', '/receipts?per_page=30&warehouse_id=5'],
    ['`+` is a space, sent as %20', '/warehouses?code=A+B', '/warehouses?code=A%20B&per_page=30'],
    ['%20 stays %20', '/warehouses?code=A%20B', '/warehouses?code=A%20B&per_page=30'],
    ['%2B stays %2B', '/warehouses?code=A%2BB', '/warehouses?code=A%2BB&per_page=30'],
    ['lower-case escapes upper-cased', '/warehouses?code=a%2fb', '/warehouses?code=a%2Fb&per_page=30'],
    [
      'reserved characters encoded',
      "/warehouses?code=a!b'c(d)e*f/g:h@i$j,k",
      '/warehouses?code=a%21b%27c%28d%29e%2Af%2Fg%3Ah%40i%24j%2Ck&per_page=30',
    ],
    ['unreserved characters raw', '/warehouses?code=x~y-z._0', '/warehouses?code=x~y-z._0&per_page=30'],
    ['UTF-8 text', '/warehouses?code=Z%C3%BCrich+Nord', '/warehouses?code=Z%C3%BCrich%20Nord&per_page=30'],
    ['an escaped name', '/warehouses?%63ode=MAIN', '/warehouses?code=MAIN&per_page=30'],
    ['a cursor of 0 kept', '/movements?after_id=0', '/movements?after_id=0&per_page=30'],
    ['a record', '/receipts/42', '/receipts/42'],
  ])('forwards the canonical target: %s', async (_label, target, expected) => {
    const { res, upstream } = await forward(`${API_PREFIX}${target}`);
    expect(res.status).toBe(200);
    expect(upstream.url).toBe(`${API_PREFIX}${expected}`);
    expect(upstream.method).toBe('GET');
  });

  it('forwards HEAD as GET and answers the client without a body', async () => {
    const { res, upstream } = await forward(`${API_PREFIX}/receipts`, { method: 'HEAD' });
    expect(res.status).toBe(200);
    expect(upstream.method).toBe('GET');
    expect(res.headers['content-length']).toBe(String(Buffer.byteLength(LIST_BODY)));
  });

  it('does not forward a fat GET body, nor its framing headers', async () => {
    const { res, upstream } = await forward(`${API_PREFIX}/receipts`, {
      headers: [['Content-Type', 'application/x-www-form-urlencoded']],
      body: 'per_page=100&warehouse_id=1',
    });
    expect(res.status).toBe(200);
    expect(upstream.body.length).toBe(0);
    const headers = headersOf(upstream);
    expect(headers.has('content-length')).toBe(false);
    expect(headers.has('transfer-encoding')).toBe(false);
    expect(headers.has('content-type')).toBe(false);
    expect(upstream.url).toBe(`${API_PREFIX}/receipts?per_page=30`);
  });

  it.each([
    ['a plain id', 'abc-123'],
    ['every allowed character', 'A-Za-z0-9._:-trace'],
    ['exactly 128 characters', 'r'.repeat(128)],
  ])('keeps a valid client X-Request-Id (%s), in the answer and upstream', async (_label, id) => {
    const { res, upstream } = await forward(`${API_PREFIX}/receipts`, { headers: [['X-Request-Id', id]] });
    expect(res.headers['x-request-id']).toBe(id);
    expect(headersOf(upstream).get('x-request-id')).toEqual([id]);
  });

  it.each([
    ['missing', undefined],
    ['with spaces', 'has some spaces'],
    ['over 128 characters', 'r'.repeat(129)],
    ['with a semicolon', 'a;b'],
    ['with a slash', 'a/b'],
    ['a log-injection attempt', 'x"}\\n{"level":"fatal'],
  ])('replaces an X-Request-Id that is %s by a generated one, also sent upstream', async (_label, id) => {
    const headers: Array<readonly [string, string]> = id === undefined ? [] : [['X-Request-Id', id]];
    const { res, upstream } = await forward(`${API_PREFIX}/receipts`, { headers });
    const generated = res.headers['x-request-id'];
    expect(generated).toMatch(REQUEST_ID);
    expect(generated).not.toBe(id);
    expect(headersOf(upstream).get('x-request-id')).toEqual([generated]);
  });

  it('generates a different id for each request', async () => {
    const first = await forward(`${API_PREFIX}/receipts`);
    const second = await forward(`${API_PREFIX}/receipts`);
    expect(first.res.headers['x-request-id']).not.toBe(second.res.headers['x-request-id']);
  });

  it.each([
    ['a 200 list', `${API_PREFIX}/receipts`, 200],
    ['a 200 record', `${API_PREFIX}/receipts/42`, 200],
    ['a 404 record', `${API_PREFIX}/receipts/${MISSING_RECORD_ID}`, 404],
  ])('answers %s with Vary: Authorization', async (_label, target, status) => {
    const res = await getWithToken(proxy.url, target, t);
    expect(res.status).toBe(status);
    expect(res.headers.vary?.split(',').map((v) => v.trim().toLowerCase())).toContain('authorization');
  });

  it('passes an upstream 404 body through unchanged', async () => {
    const res = await getWithToken(proxy.url, `${API_PREFIX}/receipts/${MISSING_RECORD_ID}`, t);
    expect(res.status).toBe(404);
    expect(res.text).toBe('{"error":"not_found"}');
  });
});

describe('forwarding to an UPSTREAM_URL with a base path', () => {
  let stub: StubUpstream;
  let proxies: ProxyHandle[];
  let t: string;

  beforeAll(async () => {
    stub = await startStub();
    proxies = [
      await startProxy({ upstreamUrl: `${stub.url}/base`, config: NO_CACHE }),
      await startProxy({ upstreamUrl: `${stub.url}/base/`, config: NO_CACHE }),
    ];
    t = await token({ company: 1 });
  });
  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await stub.close();
  });

  it.each([
    [`${API_PREFIX}/receipts?warehouse_id=7`, `/base${API_PREFIX}/receipts?per_page=30&warehouse_id=7`],
    [`${API_PREFIX}/receipts/42`, `/base${API_PREFIX}/receipts/42`],
  ])('prefixes %s with the base path (with and without a trailing slash)', async (target, expected) => {
    for (const proxy of proxies) {
      const before = stub.received.length;
      const res = await getWithToken(proxy.url, target, t);
      expect(res.status).toBe(200);
      expect(stub.received.slice(before).map((r) => r.url)).toEqual([expected]);
    }
  });
});
