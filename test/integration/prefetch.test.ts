/**
 * Next-page prefetch end to end (docs/cache.md#prefetch): the real sandbox over HTTP, the real proxy
 * in front of it (the in-process store, and Redis on a real redis-server). A walker follows
 * `meta.next_after_id` to the end of a collection; the sandbox counts what reached it. What must
 * hold: every page reaches the upstream once, the walker's requests after its second (the first
 * that follows a cursor) are answered from the cache or join a fetch in flight, the pages are the upstream's bytes for the walker's
 * company, and another company's walk sees none of them. Under a budget with no slot to spare,
 * nothing is fetched ahead.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/sandbox/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

interface Page {
  readonly data: ReadonlyArray<{ readonly id: number }>;
  readonly meta: { readonly has_more: boolean; readonly next_after_id?: number };
}

interface Walked {
  readonly pages: number;
  readonly ids: number[];
  readonly cacheStatuses: string[];
}

/** Follows the collection to its end, `per_page` at a time, as a keyset walker does. */
async function walk(base: string, bearer: string, perPage: number): Promise<Walked> {
  const ids: number[] = [];
  const cacheStatuses: string[] = [];
  let after: number | undefined;
  for (let pages = 1; ; pages++) {
    const target = `${API_PREFIX}/receipts?per_page=${String(perPage)}${after === undefined ? '' : `&after_id=${String(after)}`}`;
    const res = await getWithToken(base, target, bearer);
    expect(res.status, target).toBe(200);
    cacheStatuses.push(res.headers['cache-status'] ?? '');
    const page = JSON.parse(res.body.toString()) as Page;
    ids.push(...page.data.map((r) => r.id));
    if (!page.meta.has_more) return { pages, ids, cacheStatuses };
    after = page.meta.next_after_id;
  }
}

const PREFETCH = { cache: { resources: { receipts: { ttl: 60, prefetch: true } } } };

describe.each(['memory', 'redis'] as const)(
  'a keyset walk through the proxy with prefetch, on the %s store',
  (storeKind) => {
    let sandbox: Sandbox;
    let redis: RedisServer | undefined;
    let proxy: ProxyHandle;
    beforeAll(async () => {
      sandbox = await startSandbox();
      redis = storeKind === 'redis' ? await startRedis() : undefined;
      if (redis !== undefined) await settledOperatorState(redis);
      proxy = await startProxy({
        upstreamUrl: sandbox.url,
        config: PREFETCH,
        ...(redis !== undefined && { redisUrl: redis.url }),
      });
    });
    afterAll(async () => {
      await proxy.close();
      await sandbox.close();
      await redis?.stop();
    });

    it('asks the upstream for every page once; after the first, the walker is answered from what was fetched ahead', async () => {
      const bearer = await token({ company: 1 });
      const direct = await walk(sandbox.url, bearer, 3);
      expect(direct.pages).toBeGreaterThan(3);
      sandbox.resetStats();
      // The upstream takes a while for each page, as a real one does: the walk ahead has time to run.
      sandbox.faults.set({ latencyMs: 30 });
      const walked = await walk(proxy.url, bearer, 3);
      sandbox.faults.set({});
      expect(walked.ids).toEqual(direct.ids);
      expect(sandbox.stats().served).toBe(walked.pages);
      // The first page, and the second (whose request shows the walker following a cursor), are
      // its own misses; each later page was fetched ahead: a hit, or it joined the fetch in flight.
      expect(walked.cacheStatuses.slice(0, 2).every((status) => /fwd=miss/.test(status))).toBe(true);
      for (const status of walked.cacheStatuses.slice(2)) expect(status).toMatch(/; hit|collapsed/);
    });

    it('keeps each company’s walk its own', async () => {
      const [one, two] = await Promise.all([token({ company: 2 }), token({ company: 3 })]);
      const direct = await walk(sandbox.url, two, 4);
      await walk(proxy.url, one, 4);
      const walked = await walk(proxy.url, two, 4);
      expect(walked.ids).toEqual(direct.ids);
    });
  },
);

describe('prefetch with no upstream slot to spare', () => {
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  beforeAll(async () => {
    sandbox = await startSandbox();
    // One slot in all: while one client's page is being fetched, every other waits for it.
    proxy = await startProxy({
      upstreamUrl: sandbox.url,
      config: { ...PREFETCH, upstream: { maxConcurrent: 1, maxPerSecond: 1000, maxQueueWait: 10 } },
    });
  });
  afterAll(async () => {
    await proxy.close();
    await sandbox.close();
  });

  it('fetches nothing ahead while client requests wait for the slot', async () => {
    const bearer = await token({ company: 1 });
    sandbox.faults.set({ latencyMs: 50 });
    // Eight first pages of eight page sizes, all at once: each answered page has a next page, and
    // the line for the one slot is not empty until the last of them has the slot.
    const sizes = [2, 3, 4, 5, 6, 7, 8, 9];
    await Promise.all(
      sizes.map((n) => getWithToken(proxy.url, `${API_PREFIX}/receipts?per_page=${String(n)}`, bearer)),
    );
    sandbox.faults.set({});
    const arrivals = sandbox.received().map((r) => r.target);
    const firstPages = arrivals.filter((target) => !target.includes('after_id'));
    expect(firstPages).toHaveLength(sizes.length);
    // Until the last client request had its slot, nothing else reached the upstream.
    const lastClient = arrivals.lastIndexOf(firstPages.at(-1) ?? '');
    expect(arrivals.slice(0, lastClient + 1).filter((target) => target.includes('after_id'))).toEqual([]);
  });
});

describe('prefetch switched per resource at run time through the operator API', () => {
  const ADMIN = 'an operator token for the prefetch switch test';
  let sandbox: Sandbox;
  let proxy: ProxyHandle;
  const admin = (method: string, body?: unknown) =>
    send(proxy.adminUrl ?? '', '/admin/cache/ttl/receipts', {
      method,
      headers: [
        ['Authorization', `Bearer ${ADMIN}`],
        ['Content-Type', 'application/json'],
      ],
      ...(body !== undefined && { body: JSON.stringify(body) }),
    });
  beforeAll(async () => {
    sandbox = await startSandbox();
    proxy = await startProxy({ upstreamUrl: sandbox.url, adminToken: ADMIN });
  });
  afterAll(async () => {
    await proxy.close();
    await sandbox.close();
  });

  it('off by default; on for the resource once the operator says so; off again when the override goes', async () => {
    const bearer = await token({ company: 1 });
    const statuses = async (perPage: number): Promise<string[]> =>
      (await walk(proxy.url, bearer, perPage)).cacheStatuses;
    expect((await statuses(5)).every((status) => /fwd=miss/.test(status))).toBe(true);
    const on = await admin('PUT', { prefetch: true });
    expect(on.status).toBe(200);
    expect(JSON.parse(on.body.toString())).toMatchObject({
      override: { prefetch: true },
      effective: { prefetch: true },
    });
    sandbox.faults.set({ latencyMs: 20 });
    const walked = await statuses(6);
    sandbox.faults.set({});
    for (const status of walked.slice(2)) expect(status).toMatch(/; hit|collapsed/);
    expect((await admin('DELETE')).status).toBe(204);
    expect((await statuses(7)).every((status) => /fwd=miss/.test(status))).toBe(true);
  });
});
