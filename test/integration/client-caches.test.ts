/**
 * The freshness headers judged by the HTTP caches real clients use (docs/clients.md#freshness):
 * `http-cache-semantics` (behind most Node HTTP caches, got's among them), undici's
 * `interceptors.cache()` as a private cache, and got with its cache. Each computes a response's
 * remaining freshness as max-age − Age (RFC 9111 §4.2.3) and, as a private cache, keeps a
 * response to a request with `Authorization` only when the response allows it (§3.5, as undici
 * applies it). So they show what a client concludes, not what the header text says.
 *
 * Time: the proxy's clock and the process's `Date` (which the clients read) are one faked clock
 * that only these tests move; timers stay real, so sockets behave as ever. It starts an hour in the
 * past: the `Date` header that Node writes from the real clock then never makes a response look
 * older to a client than its `Age` says.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { got } from 'got';
import CachePolicy from 'http-cache-semantics';
import { Agent, interceptors, request } from 'undici';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, type RawResponse } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';

const P = API_PREFIX;
const TTL = 30;
const POLICY = {
  cache: {
    defaults: { ttl: TTL, staleWhileRevalidate: 30, staleIfError: 600, notFoundTtl: 10 },
    resources: { warehouses: { ttl: TTL }, movements: { ttl: TTL } },
  },
};

let clock = 0;
function setClock(at: number): void {
  clock = at;
  vi.setSystemTime(at);
}
function advance(ms: number): void {
  setClock(clock + ms);
}

/** What reached the proxy's client port, and how it was answered. */
interface Arrival {
  readonly target: string;
  readonly ifNoneMatch: string | undefined;
  status: number;
}

let sandbox: Sandbox;
let proxy: ProxyHandle;
let arrivals: Arrival[];
let refreshes: Array<Promise<void>>;
let bearer: string;

beforeAll(async () => {
  vi.useFakeTimers({ toFake: ['Date'] });
  // A whole second, an hour ago (see the header).
  setClock(Math.floor(Date.now() / 1000) * 1000 - 3_600_000);
  sandbox = await startSandbox();
});
afterAll(async () => {
  await sandbox.close();
  vi.useRealTimers();
});

beforeEach(async () => {
  arrivals = [];
  refreshes = [];
  bearer = await token();
  proxy = await startProxy({
    upstreamUrl: sandbox.url,
    config: POLICY,
    now: () => clock,
    onBackgroundRefresh: (settled) => refreshes.push(settled),
  });
  proxy.app.server.on('request', (req: IncomingMessage, res: ServerResponse) => {
    const arrival: Arrival = { target: req.url ?? '', ifNoneMatch: req.headers['if-none-match'], status: 0 };
    arrivals.push(arrival);
    res.on('finish', () => {
      arrival.status = res.statusCode;
    });
  });
});
afterEach(async () => {
  sandbox.faults.clear();
  await proxy.close();
});

/** The request and response as http-cache-semantics reads them. */
function policyOf(target: string, res: RawResponse, options: CachePolicy.Options = { shared: false }): CachePolicy {
  return new CachePolicy(
    { url: target, method: 'GET', headers: { host: 'proxy', authorization: `Bearer ${bearer}` } },
    { status: res.status, headers: res.headers },
    options,
  );
}

function cacheStatusTtl(res: RawResponse): number {
  const ttl = /; ttl=(-?\d+)/.exec(res.headers['cache-status'] ?? '')?.[1];
  if (ttl === undefined) throw new Error(`no ttl in Cache-Status: ${res.headers['cache-status'] ?? ''}`);
  return Number(ttl);
}

describe('http-cache-semantics computes the freshness the proxy meant', () => {
  it('12.3 s into a 30 s TTL: 17 s left for the client (rounded down from 17.7), as Cache-Status says', async () => {
    const target = `${P}/receipts?per_page=3`;
    await getWithToken(proxy.url, target, bearer);
    advance(12_300);
    const hit = await getWithToken(proxy.url, target, bearer);
    expect(hit.headers['cache-control']).toBe(`private, max-age=${TTL}, s-maxage=${TTL}`);
    expect(hit.headers.age).toBe('13');
    expect(hit.headers.vary).toBe('Accept-Encoding, Authorization');
    const policy = policyOf(target, hit);
    expect(policy.storable()).toBe(true);
    expect(policy.stale()).toBe(false);
    expect(policy.timeToLive()).toBe(17_000);
    expect(cacheStatusTtl(hit)).toBe(17);
    // Past half the TTL the client still has the rest of it (the old headers left it nothing).
    advance(8_000);
    const late = await getWithToken(proxy.url, target, bearer);
    expect(policyOf(target, late).timeToLive()).toBe(9_000);
    expect(cacheStatusTtl(late)).toBe(9);
  });

  it('a shared cache may not store a page (private); a private one may, although the request had Authorization', async () => {
    const target = `${P}/receipts?per_page=4`;
    const miss = await getWithToken(proxy.url, target, bearer);
    expect(policyOf(target, miss, { shared: true }).storable()).toBe(false);
    const mine = policyOf(target, miss, { shared: false });
    expect(mine.storable()).toBe(true);
    expect(mine.timeToLive()).toBe(TTL * 1000);
    // Vary: Authorization: another credential's request is not answered from this copy.
    const other = {
      url: target,
      method: 'GET',
      headers: { host: 'proxy', authorization: `Bearer ${await token({ subject: 'other' })}` },
    };
    expect(mine.satisfiesWithoutRevalidation(other)).toBe(false);
  });

  it('a page served stale while the proxy revalidates is stale to the client', async () => {
    const target = `${P}/stocktakes?per_page=2`;
    await getWithToken(proxy.url, target, bearer);
    advance((TTL + 5) * 1000);
    const stale = await getWithToken(proxy.url, target, bearer);
    expect(stale.headers['cache-status']).toBe('slab-proxy; hit; ttl=-5; detail=stale-while-revalidate');
    expect(stale.headers.age).toBe(String(TTL + 5));
    const policy = policyOf(target, stale);
    expect(policy.stale()).toBe(true);
    expect(policy.timeToLive()).toBe(0);
    await Promise.all(refreshes);
    const fresh = await getWithToken(proxy.url, target, bearer);
    expect(fresh.headers.age).toBe('0');
    expect(policyOf(target, fresh).timeToLive()).toBe(TTL * 1000);
  });

  it('a page served stale because the upstream failed is stale to the client', async () => {
    const target = `${P}/transfers?per_page=2`;
    await getWithToken(proxy.url, target, bearer);
    advance(100_000);
    sandbox.faults.set({ status: 500, times: 1 });
    const stale = await getWithToken(proxy.url, target, bearer);
    expect(stale.status).toBe(200);
    expect(stale.headers['cache-status']).toMatch(/^slab-proxy; fwd=stale; fwd-status=500;/);
    expect(stale.headers.age).toBe('100');
    expect(policyOf(target, stale).stale()).toBe(true);
  });

  it('a run-time TTL override applies to a page already cached: max-age is the new lifetime, Age unchanged', async () => {
    const target = `${P}/receipts?per_page=6`;
    await getWithToken(proxy.url, target, bearer);
    advance(12_000);
    await proxy.app.control.setOverride('receipts', { ttl: 60 });
    const hit = await getWithToken(proxy.url, target, bearer);
    expect(hit.headers['cache-control']).toBe('private, max-age=60, s-maxage=60');
    expect(hit.headers.age).toBe('12');
    expect(policyOf(target, hit).timeToLive()).toBe(48_000);
  });

  it('a record’s 404 is fresh for notFoundTtl', async () => {
    const target = `${P}/receipts/999999999`;
    await getWithToken(proxy.url, target, bearer);
    advance(4_000);
    const hit = await getWithToken(proxy.url, target, bearer);
    expect(hit.status).toBe(404);
    expect(hit.headers['cache-control']).toBe('private, max-age=10, s-maxage=10');
    expect(policyOf(target, hit).timeToLive()).toBe(6_000);
  });

  it('a 304 freshens the client’s copy with the current Age, and carries no Content-Type', async () => {
    const target = `${P}/receipts?per_page=7`;
    const miss = await getWithToken(proxy.url, target, bearer);
    const policy = policyOf(target, miss);
    advance(5_000);
    const conditional = policy.revalidationHeaders({
      url: target,
      method: 'GET',
      headers: { host: 'proxy', authorization: `Bearer ${bearer}` },
    });
    expect(conditional['if-none-match']).toBe(miss.headers.etag);
    const notModified = await getWithToken(proxy.url, target, bearer, {
      headers: [['If-None-Match', String(conditional['if-none-match'])]],
    });
    expect(notModified.status).toBe(304);
    expect(notModified.headers['content-type']).toBeUndefined();
    expect(notModified.headers.etag).toBe(miss.headers.etag);
    const revalidated = policy.revalidatedPolicy(
      { url: target, method: 'GET', headers: { host: 'proxy' } },
      { status: 304, headers: notModified.headers },
    );
    expect(revalidated.modified).toBe(false);
    expect(revalidated.policy.timeToLive()).toBe((TTL - 5) * 1000);
  });
});

describe('undici’s private cache (interceptors.cache, type private)', () => {
  it('keeps a page, serves it again from its own cache while fresh, then revalidates with If-None-Match (one 304)', async () => {
    const target = `${P}/warehouses?per_page=5`;
    const dispatcher = new Agent().compose(interceptors.cache({ type: 'private' }));
    const get = async (): Promise<{ status: number; body: string; age: string | undefined }> => {
      const res = await request(`${proxy.url}${target}`, {
        dispatcher,
        headers: { authorization: `Bearer ${bearer}` },
      });
      const age = res.headers.age;
      return { status: res.statusCode, body: await res.body.text(), age: typeof age === 'string' ? age : undefined };
    };
    try {
      const warm = await getWithToken(proxy.url, target, bearer); // the proxy's copy, stored at T0
      arrivals = [];
      advance(20_000);
      const first = await get(); // past half the TTL: 10 s are left
      expect(first).toMatchObject({ status: 200, body: warm.text });
      expect(arrivals).toHaveLength(1);

      advance(8_000);
      const second = await get();
      expect(second).toEqual({ status: 200, body: warm.text, age: '28' });
      expect(arrivals, 'served from the client’s own cache').toHaveLength(1);

      advance(3_000); // 31 s: stale to the client as to the proxy
      const third = await get();
      expect(third).toMatchObject({ status: 200, body: warm.text });
      expect(arrivals).toHaveLength(2);
      expect(arrivals[1]).toMatchObject({ ifNoneMatch: warm.headers.etag, status: 304 });
    } finally {
      await dispatcher.close();
    }
  });

  it('does not keep a page for another credential', async () => {
    const target = `${P}/warehouses?per_page=6`;
    const dispatcher = new Agent().compose(interceptors.cache({ type: 'private' }));
    try {
      for (const credential of [bearer, await token({ subject: 'someone-else' })]) {
        const res = await request(`${proxy.url}${target}`, {
          dispatcher,
          headers: { authorization: `Bearer ${credential}` },
        });
        expect(res.statusCode).toBe(200);
        await res.body.dump();
      }
      expect(arrivals).toHaveLength(2);
    } finally {
      await dispatcher.close();
    }
  });
});

describe('got’s cache (cacheable-request, a private cache)', () => {
  /** A Map that tells when got has stored an entry: it stores after handing the response over. */
  class WatchedMap extends Map<string, unknown> {
    #stored: Array<() => void> = [];
    nextStore(): Promise<void> {
      return new Promise((resolve) => this.#stored.push(resolve));
    }
    override set(key: string, value: unknown): this {
      super.set(key, value);
      for (const wake of this.#stored.splice(0)) wake();
      return this;
    }
  }

  it('serves a second GET within freshness from its cache, then revalidates with If-None-Match (one 304)', async () => {
    const target = `${P}/remnants?per_page=5`;
    const cache = new WatchedMap();
    const get = (): Promise<{ statusCode: number; body: string; isFromCache: boolean }> =>
      got(`${proxy.url}${target}`, {
        cache,
        cacheOptions: { shared: false },
        headers: { authorization: `Bearer ${bearer}` },
        retry: { limit: 0 },
      });
    const warm = await getWithToken(proxy.url, target, bearer);
    arrivals = [];
    advance(20_000);
    const stored = cache.nextStore();
    const first = await get();
    await stored;
    expect(first).toMatchObject({ statusCode: 200, body: warm.text, isFromCache: false });
    // got accepts br: it was sent the stored brotli bytes, whose validator is the br one.
    const brEtag = `${(warm.headers.etag ?? '').slice(0, -1)}.br"`;

    advance(8_000);
    const second = await get();
    expect(second).toMatchObject({ statusCode: 200, body: warm.text, isFromCache: true });
    expect(arrivals).toHaveLength(1);

    advance(3_000);
    const third = await get();
    expect(third).toMatchObject({ statusCode: 200, body: warm.text, isFromCache: true });
    expect(arrivals).toHaveLength(2);
    expect(arrivals[1]).toMatchObject({ ifNoneMatch: brEtag, status: 304 });
  });
});
