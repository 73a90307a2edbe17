/**
 * The cache end to end, through the real proxy in front of the real sandbox, on both stores (the
 * in-process store of the embedded default, and Redis on a real redis-server). Time is the proxy's
 * injectable clock, so freshness, stale-while-revalidate and stale-if-error are tested without
 * waiting. Each test gets a fresh proxy, sandbox and (for Redis) an empty cache: every key but the
 * upstream budget's ledger and the operator state, which a new proxy would otherwise wait to see
 * begun anew (its first epoch's window, the operator state's age: 2–3 s a test, for nothing this
 * suite is about).
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { LARGE_COMPANY, LARGE_RESOURCE } from '../../src/sandbox/dataset.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { emptyCache, type RedisServer, startRedis } from '../helpers/redis.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

const P = API_PREFIX;
/** One policy for the tests: 10 s fresh, 20 s stale-while-revalidate, 100 s stale-if-error. */
const POLICY = {
  cache: {
    defaults: { ttl: 10, staleWhileRevalidate: 20, staleIfError: 100, notFoundTtl: 5 },
    resources: { warehouses: { ttl: 10 }, movements: { ttl: 10 } },
  },
};
/** No stale-while-revalidate, so that a stale entry goes to the upstream and stale-if-error decides. */
const NO_SWR = { cache: { ...POLICY.cache, defaults: { ...POLICY.cache.defaults, staleWhileRevalidate: 0 } } };

function cacheStatus(res: RawResponse): string {
  return res.headers['cache-status'] ?? '';
}

let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
  await settledOperatorState(redis);
});
afterAll(() => redis.stop());

describe.each(['memory', 'redis'] as const)('cache on the %s store', (storeKind) => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  let clock: number;
  let refreshes: Array<Promise<void>>;
  let bearer: string;

  async function start(config: Record<string, unknown> = POLICY): Promise<void> {
    await proxy?.close();
    proxy = await startProxy({
      upstreamUrl: sandbox.url,
      config,
      now: () => clock,
      onBackgroundRefresh: (settled) => refreshes.push(settled),
      ...(storeKind === 'redis' && { redisUrl: redis.url }),
    });
  }

  /** Upstream requests for a target, counted under its canonical form (what the proxy sends). */
  function upstreamCount(target: string): number {
    const read = canonicaliseTarget(target);
    if (read instanceof ProxyError) throw new Error(read.code);
    return sandbox.stats().byTarget[read.upstreamTarget] ?? 0;
  }

  beforeEach(async () => {
    if (storeKind === 'redis') await emptyCache(redis.url);
    clock = Date.now();
    refreshes = [];
    sandbox = await startSandbox();
    bearer = await token();
    proxy = undefined as unknown as ProxyHandle;
    await start();
  });
  afterEach(async () => {
    await proxy.close();
    await sandbox.close();
  });

  it('a hit after a miss, with the upstream asked once and the same bytes', async () => {
    const target = `${P}/receipts?per_page=5`;
    const miss = await getWithToken(proxy.url, target, bearer);
    expect(miss.status).toBe(200);
    expect(cacheStatus(miss)).toBe('slab-proxy; fwd=miss; fwd-status=200; stored');
    clock += 3_000;
    const hit = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(hit)).toBe('slab-proxy; hit; ttl=7');
    expect(hit.body.equals(miss.body)).toBe(true);
    // max-age is the freshness lifetime and Age the age: a client computes 10 − 3 = 7 s left.
    expect(hit.headers.age).toBe('3');
    expect(hit.headers['cache-control']).toBe('private, max-age=10, s-maxage=10');
    expect(hit.headers.vary).toBe('Accept-Encoding, Authorization');
    expect(hit.headers.etag).toBe(miss.headers.etag);
    expect(upstreamCount(target)).toBe(1);
    const direct = await getWithToken(sandbox.url, target, bearer);
    expect(hit.body.equals(direct.body)).toBe(true);
  });

  it('parameter order and per_page absent, 30 or %33%30 share one entry', async () => {
    const warehouse = sandbox.dataset.get('receipts')?.find((r) => r.company_id === 1)?.warehouse_id;
    const targets = [
      `${P}/receipts?warehouse_id=${String(warehouse)}`,
      `${P}/receipts?per_page=30&warehouse_id=${String(warehouse)}`,
      `${P}/receipts?warehouse_id=${String(warehouse)}&per_page=%33%30`,
      `${P}/receipts?per%5Fpage=30&warehouse%5Fid=${String(warehouse)}`,
    ];
    const answers = [];
    for (const target of targets) answers.push(await getWithToken(proxy.url, target, bearer));
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200]);
    expect(answers.slice(1).every((a) => cacheStatus(a).startsWith('slab-proxy; hit'))).toBe(true);
    expect(sandbox.stats().served).toBe(1);
  });

  it('two tokens of one company share an entry', async () => {
    const target = `${P}/warehouses`;
    await getWithToken(proxy.url, target, await token({ subject: 'alice' }));
    const second = await getWithToken(proxy.url, target, await token({ subject: 'bob' }));
    expect(cacheStatus(second)).toMatch(/^slab-proxy; hit/);
    expect(sandbox.stats().served).toBe(1);
  });

  it('two companies never share: company 2 asking for company 1’s record gets the upstream’s 404', async () => {
    const record = sandbox.dataset.get('receipts')?.find((r) => r.company_id === 1);
    const target = `${P}/receipts/${String(record?.id)}`;
    const mine = await getWithToken(proxy.url, target, bearer);
    expect(mine.status).toBe(200);
    expect((mine.json() as { data: { company_id: number } }).data.company_id).toBe(1);
    const theirs = await getWithToken(proxy.url, target, await token({ company: 2 }));
    expect(theirs.status).toBe(404);
    expect(theirs.json()).toEqual({ error: 'not_found' });
    expect(upstreamCount(target)).toBe(2);
    const again = await getWithToken(proxy.url, target, bearer);
    expect(again.body.equals(mine.body)).toBe(true);
    expect(cacheStatus(again)).toMatch(/^slab-proxy; hit/);
    // The string company "1" and the number 1 are one tenant (docs/credentials.md): the same entry.
    const typedAsText = await getWithToken(proxy.url, target, await token({ company: '1' }));
    expect(cacheStatus(typedAsText)).toMatch(/^slab-proxy; hit/);
    expect(upstreamCount(target)).toBe(2);
  });

  it('caches a record’s 404 for notFoundTtl, then asks again', async () => {
    const target = `${P}/receipts/999999999`;
    const first = await getWithToken(proxy.url, target, bearer);
    expect(first.status).toBe(404);
    expect(cacheStatus(first)).toBe('slab-proxy; fwd=miss; fwd-status=404; stored');
    const second = await getWithToken(proxy.url, target, bearer);
    expect(second.status).toBe(404);
    expect(second.body.equals(first.body)).toBe(true);
    expect(cacheStatus(second)).toBe('slab-proxy; hit; ttl=5');
    clock += 5_000 + 20_000 + 1;
    await getWithToken(proxy.url, target, bearer);
    expect(upstreamCount(target)).toBe(2);
  });

  it('partition employee: employees do not share, one employee’s tokens do', async () => {
    await start({
      cache: { ...POLICY.cache, resources: { ...POLICY.cache.resources, receipts: { partition: 'employee' } } },
    });
    const target = `${P}/receipts?per_page=3`;
    const employee7 = await token({ employee: 7, employeePermissions: ['view_slab', 'view_slab_logistics'] });
    const employee7b = await token({
      employee: 7,
      employeePermissions: ['view_slab', 'view_slab_logistics'],
      subject: 'other',
    });
    const employee8 = await token({ employee: 8, employeePermissions: ['view_slab', 'view_slab_logistics'] });
    await getWithToken(proxy.url, target, employee7);
    expect(cacheStatus(await getWithToken(proxy.url, target, employee7b))).toMatch(/^slab-proxy; hit/);
    expect(cacheStatus(await getWithToken(proxy.url, target, employee8))).toMatch(/fwd=miss/);
    expect(cacheStatus(await getWithToken(proxy.url, target, bearer))).toMatch(/fwd=miss/);
    expect(upstreamCount(target)).toBe(3);
    // Other resources keep the company partition.
    await getWithToken(proxy.url, `${P}/warehouses`, employee7);
    expect(cacheStatus(await getWithToken(proxy.url, `${P}/warehouses`, employee8))).toMatch(/^slab-proxy; hit/);
  });

  it('partition credential: only the same sub shares', async () => {
    await start({ cache: { ...POLICY.cache, partition: 'credential' } });
    const target = `${P}/remnants`;
    await getWithToken(proxy.url, target, await token({ subject: 'alice' }));
    expect(cacheStatus(await getWithToken(proxy.url, target, await token({ subject: 'alice' })))).toMatch(
      /^slab-proxy; hit/,
    );
    expect(cacheStatus(await getWithToken(proxy.url, target, await token({ subject: 'bob' })))).toMatch(/fwd=miss/);
  });

  it('stale-while-revalidate: serves the stale copy at once and refreshes it once in the background', async () => {
    const target = `${P}/stocktakes`;
    const first = await getWithToken(proxy.url, target, bearer);
    clock += 15_000; // 5 s past freshness, inside the 20 s window
    sandbox.faults.set({ latencyMs: 300, times: 1 }); // the refresh is still running for all ten
    const stale = await Promise.all(Array.from({ length: 10 }, () => getWithToken(proxy.url, target, bearer)));
    for (const res of stale) {
      expect(res.status).toBe(200);
      expect(res.body.equals(first.body)).toBe(true);
      expect(cacheStatus(res)).toBe('slab-proxy; hit; ttl=-5; detail=stale-while-revalidate');
      // Age 15 over a lifetime of 10: stale to every client, which must not reuse it as fresh.
      expect(res.headers['cache-control']).toBe('private, max-age=10, s-maxage=10');
      expect(res.headers.age).toBe('15');
    }
    expect(refreshes.length).toBe(1);
    await Promise.all(refreshes);
    expect(upstreamCount(target)).toBe(2);
    const fresh = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(fresh)).toBe('slab-proxy; hit; ttl=10');
    expect(fresh.headers.age).toBe('0');
  });

  it('refresh ahead: a hit late in its freshness is a hit, and refreshes the page once in the background', async () => {
    await start({ cache: { ...POLICY.cache, refresh: { ahead: 0.5, maxConcurrent: 8 } } });
    const target = `${P}/stocktakes`;
    await getWithToken(proxy.url, target, bearer);
    clock += 4_000; // before the window: the last 5 s of the 10
    expect(cacheStatus(await getWithToken(proxy.url, target, bearer))).toBe('slab-proxy; hit; ttl=6');
    expect(refreshes.length).toBe(0);
    clock += 5_999; // 1 ms before expiry: past every page's own point in the window
    // The refresh is slow at the upstream, so that all five are answered while it runs.
    sandbox.faults.set({ latencyMs: 300, times: 1 });
    const late = await Promise.all(Array.from({ length: 5 }, () => getWithToken(proxy.url, target, bearer)));
    for (const res of late) expect(cacheStatus(res)).toBe('slab-proxy; hit; ttl=0');
    expect(refreshes.length).toBe(1);
    await Promise.all(refreshes);
    expect(upstreamCount(target)).toBe(2);
    const renewed = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(renewed)).toBe('slab-proxy; hit; ttl=10');
    expect(renewed.headers.age).toBe('0');
  });

  it('background refreshes are bounded per replica: beyond the bound a stale page is served and left for a later request', async () => {
    await start({ cache: { ...POLICY.cache, refresh: { ahead: 0, maxConcurrent: 2 } } });
    const targets = ['receipts', 'transfers', 'stocktakes', 'remnants', 'fulfilments'].map((name) => `${P}/${name}`);
    for (const target of targets) await getWithToken(proxy.url, target, bearer);
    clock += 15_000; // stale, inside stale-while-revalidate
    sandbox.faults.set({ latencyMs: 300, times: 5 }); // the two refreshes still run for the others
    const stale = await Promise.all(targets.map((target) => getWithToken(proxy.url, target, bearer)));
    for (const res of stale) {
      expect(res.status).toBe(200);
      expect(cacheStatus(res)).toMatch(/detail=stale-while-revalidate$/);
    }
    expect(refreshes.length).toBe(2);
    await Promise.all(refreshes);
    expect(targets.reduce((sum, target) => sum + upstreamCount(target), 0)).toBe(targets.length + 2);
    // The bound freed: the pages left stale are refreshed by later requests, two at a time.
    sandbox.faults.set({});
    for (let round = 0; round < 2; round++) {
      for (const target of targets) await getWithToken(proxy.url, target, bearer);
      await Promise.all(refreshes);
    }
    expect(refreshes.length).toBe(targets.length);
    expect(targets.reduce((sum, target) => sum + upstreamCount(target), 0)).toBe(targets.length * 2);
    for (const target of targets)
      expect(cacheStatus(await getWithToken(proxy.url, target, bearer))).toMatch(/^slab-proxy; hit; ttl=\d+$/);
  });

  it.each([
    ['a 503', { status: 503 }, 503, 'bad_gateway'],
    ['a 500', { status: 500 }, 500, 'bad_gateway'],
    ['a malformed body', { body: 'malformed' as const }, 502, 'bad_gateway'],
    ['a truncated body', { body: 'truncated' as const }, 502, 'bad_gateway'],
    ['a 429', { status: 429, retryAfter: '7' }, 429, 'rate_limited'],
  ])(
    'stale-if-error on %s: the stale copy, then the error once staleIfError has passed',
    async (_label, fault, fwdStatus, code) => {
      await start(NO_SWR);
      const target = `${P}/transfers`;
      const first = await getWithToken(proxy.url, target, bearer);
      sandbox.faults.set(fault);
      clock += 10_000 + 40_000; // stale for 40 s: inside the 100 s of stale-if-error
      const stale = await getWithToken(proxy.url, target, bearer);
      expect(stale.status).toBe(200);
      expect(stale.body.equals(first.body)).toBe(true);
      expect(cacheStatus(stale)).toBe(`slab-proxy; fwd=stale; fwd-status=${fwdStatus}; ttl=-40`);
      clock += 70_000; // stale for 110 s: past it
      const late = await getWithToken(proxy.url, target, bearer);
      if (code === 'rate_limited') {
        expect(late.status).toBe(429); // the upstream's own 429, passed through
        expect(late.headers['retry-after']).toBe('7');
      } else {
        expect(late.status).toBe(502);
        expect((late.json() as { code: string }).code).toBe(code);
      }
    },
  );

  it('stale-if-error on a deadline and on a refused connection', async () => {
    await start({ ...NO_SWR, upstream: { timeout: 0.2 } });
    const target = `${P}/fulfilments`;
    const first = await getWithToken(proxy.url, target, bearer);
    clock += 30_000;
    sandbox.faults.set({ latencyMs: 1_000 });
    const slow = await getWithToken(proxy.url, target, bearer);
    expect(slow.body.equals(first.body)).toBe(true);
    expect(cacheStatus(slow)).toBe('slab-proxy; fwd=stale; fwd-status=504; ttl=-20');
    sandbox.faults.clear();
    const refusing = sandbox.refuse(60_000); // until accept(): no timer to race on a busy machine
    try {
      const refused = await getWithToken(proxy.url, target, bearer);
      expect(refused.body.equals(first.body)).toBe(true);
      expect(cacheStatus(refused)).toBe('slab-proxy; fwd=stale; fwd-status=503; ttl=-20');
    } finally {
      sandbox.accept();
      await refusing;
    }
  });

  it('If-None-Match with the current ETag: 304 without a body; another tag: 200', async () => {
    const target = `${P}/quote-links`;
    const first = await getWithToken(proxy.url, target, bearer);
    const etag = first.headers.etag ?? '';
    expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
    for (const header of [etag, `W/${etag}`, `"nope", ${etag}`, '*']) {
      const res = await getWithToken(proxy.url, target, bearer, { headers: [['If-None-Match', header]] });
      expect(res.status).toBe(304);
      expect(res.body.length).toBe(0);
      expect(res.headers.etag).toBe(etag);
      expect(cacheStatus(res)).toMatch(/^slab-proxy; hit/);
    }
    const other = await getWithToken(proxy.url, target, bearer, { headers: [['If-None-Match', '"something-else"']] });
    expect(other.status).toBe(200);
    expect(other.body.equals(first.body)).toBe(true);
    // 304 comes after authentication: no token, no validator check.
    expect((await send(proxy.url, target, { headers: [['If-None-Match', etag]] })).status).toBe(401);
  });

  it('a HEAD on a cold key stores the whole body', async () => {
    const target = `${P}/supplier-materials?per_page=7`;
    const head = await send(proxy.url, target, { method: 'HEAD', headers: [['Authorization', `Bearer ${bearer}`]] });
    expect(head.status).toBe(200);
    expect(head.body.length).toBe(0);
    const length = Number(head.headers['content-length']);
    expect(length).toBeGreaterThan(100);
    const get = await getWithToken(proxy.url, target, bearer);
    expect(cacheStatus(get)).toMatch(/^slab-proxy; hit/);
    expect(get.body.length).toBe(length);
    expect(upstreamCount(target)).toBe(1);
  });

  it('coalesces concurrent misses into one upstream request', async () => {
    const target = `${P}/${LARGE_RESOURCE}?per_page=100`;
    sandbox.faults.set({ latencyMs: 300 });
    const answers = await Promise.all(Array.from({ length: 60 }, () => getWithToken(proxy.url, target, bearer)));
    expect(answers.every((a) => a.status === 200 && a.body.equals(answers[0]?.body ?? Buffer.alloc(0)))).toBe(true);
    expect(upstreamCount(target)).toBe(1);
    expect(answers.filter((a) => cacheStatus(a).endsWith('; stored'))).toHaveLength(1);
    expect(answers.filter((a) => cacheStatus(a) === 'slab-proxy; fwd=miss; fwd-status=200; collapsed')).toHaveLength(
      59,
    );
    expect(LARGE_COMPANY).toBe(1);
  });

  it('a leader’s 403 is its own: the waiting requests fetch with their own tokens', async () => {
    const target = `${P}/remnants?per_page=4`;
    sandbox.faults.set({ status: 403, latencyMs: 200, times: 1 });
    const answers = await Promise.all(
      Array.from({ length: 12 }, async (_, i) =>
        getWithToken(proxy.url, target, await token({ subject: `user-${i}` })),
      ),
    );
    const statuses = answers.map((a) => a.status).sort();
    expect(statuses.filter((s) => s === 403)).toHaveLength(1);
    expect(statuses.filter((s) => s === 200)).toHaveLength(11);
    // One leader's 403, then one fill for everyone else.
    expect(upstreamCount(target)).toBe(2);
    const forbidden = answers.find((a) => a.status === 403);
    expect(forbidden?.headers['cache-control']).toBe('no-store');
    expect(cacheStatus(forbidden ?? (answers[0] as RawResponse))).toBe('slab-proxy; fwd=miss; fwd-status=403');
  });

  it('never caches an upstream 401 or 403 (429: see upstream-guard.test.ts)', async () => {
    for (const status of [401, 403]) {
      const target = `${P}/transfer-items?per_page=${status - 400}`;
      const refused = await token({ subject: `refused-${status}` });
      sandbox.faults.set({ status, times: 1 });
      expect((await getWithToken(proxy.url, target, refused)).status).toBe(status);
      const next = await getWithToken(proxy.url, target, bearer);
      expect(next.status).toBe(200);
      expect(cacheStatus(next)).toBe('slab-proxy; fwd=miss; fwd-status=200; stored');
      expect(upstreamCount(target)).toBe(2);
      if (status === 401) {
        // The upstream refused a token the proxy accepted: the proxy revokes it too (docs/credentials.md).
        const again = await getWithToken(proxy.url, target, refused);
        expect(again.status).toBe(401);
        expect((again.json() as { code: string }).code).toBe('unauthenticated');
        expect(upstreamCount(target)).toBe(2);
      }
    }
  });

  it('an upstream 429 with no stale copy is passed through with its Retry-After', async () => {
    sandbox.faults.set({ status: 429, retryAfter: '3' });
    const res = await getWithToken(proxy.url, `${P}/quote-link-items`, bearer);
    expect(res.status).toBe(429);
    expect(res.headers['retry-after']).toBe('3');
    expect(res.headers['cache-control']).toBe('no-store');
  });

  it('a purge of a company’s resource, or of the whole company, makes the next request a miss', async () => {
    const movements = `${P}/movements?per_page=2`;
    const remnants = `${P}/remnants?per_page=2`;
    const otherCompany = await token({ company: 2 });
    for (const target of [movements, remnants]) {
      await getWithToken(proxy.url, target, bearer);
      await getWithToken(proxy.url, target, otherCompany);
      expect(cacheStatus(await getWithToken(proxy.url, target, bearer))).toMatch(/^slab-proxy; hit/); // in L1 too
    }
    expect(await proxy.app.reads.purge('1', 'movements')).toBe(true);
    expect(cacheStatus(await getWithToken(proxy.url, movements, bearer))).toBe(
      'slab-proxy; fwd=miss; fwd-status=200; stored',
    );
    expect(cacheStatus(await getWithToken(proxy.url, remnants, bearer))).toMatch(/^slab-proxy; hit/);
    expect(await proxy.app.reads.purge('1')).toBe(true);
    expect(cacheStatus(await getWithToken(proxy.url, remnants, bearer))).toMatch(/fwd=miss/);
    // Company 2 was never purged.
    expect(cacheStatus(await getWithToken(proxy.url, remnants, otherCompany))).toMatch(/^slab-proxy; hit/);
  });

  it('keeps L1 copies only until the ttl of the cache entry', async () => {
    const target = `${P}/warehouses?active=true`;
    await getWithToken(proxy.url, target, bearer);
    clock += 10_000 + 20_000 + 1; // past freshness and stale-while-revalidate
    const res = await getWithToken(proxy.url, target, bearer);
    // Forwarded to be revalidated (docs/cache.md#revalidation), not served from the L1.
    expect(cacheStatus(res)).toMatch(/^slab-proxy; fwd=stale; fwd-status=(200|304); stored$/);
    expect(upstreamCount(target)).toBe(2);
  });
});
