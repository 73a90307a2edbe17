/**
 * One company's crawl cannot take the cache from another (docs/cache.md#admission): company B
 * reads its hot pages round and round, first alone, then while company A crawls many times as many
 * distinct pages as the tier holds; B's share of hits in the tier beside the crawl is at least 95%
 * of its share alone. In the in-process store of the embedded default (a hit there is a hit of the
 * cache: its `Cache-Status`), and in the L1 in front of a real Redis (a miss there is still a hit
 * from Redis: its own count, `slab_proxy_l1_lookups_total`, in rounds of B's alone, once the crawl
 * is over). And the same while A reads every page of its crawl twice, as an exporter that retries
 * or walks twice does: past the doorkeeper, A is held to its share of the tier's bytes
 * (docs/cache.md#company-shares). Every page fresh throughout: a miss is the crawl's doing, never a
 * page's age. Real proxy, real sandbox.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { LARGE_COMPANY, LARGE_RESOURCE } from '../../src/sandbox/dataset.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { parseExposition } from '../helpers/prometheus.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { until } from '../helpers/replicas.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

/**
 * Every page fresh for the whole file (the shipped TTLs are 10–300 s): a page that went stale
 * would miss the tier for that reason, not for the crawl's.
 */
const LONG_LIVED = {
  defaults: { ttl: 3600, staleWhileRevalidate: 30, staleIfError: 600, notFoundTtl: 10 },
  resources: { movements: { ttl: 3600 }, warehouses: { ttl: 3600 } },
};

/** The in-process tier's bound: small against the crawl, room for B's hot pages and some more. */
const TIER_BYTES = 256 * 1024;
/** B's hot pages: three per resource, small ones. */
const HOT = RESOURCE_NAMES.flatMap((resource) =>
  [3, 4, 5].map((n) => `${API_PREFIX}/${resource}?per_page=${String(n)}`),
);
/** A's crawl: pages of its large collection at many page sizes (10–20 KB each), each read once. */
const CRAWL = Array.from({ length: 1_500 }, (_, i) => {
  const perPage = 60 + (i % 40);
  const afterId = Math.floor(i / 40) * 5;
  return `${API_PREFIX}/${LARGE_RESOURCE}?after_id=${String(afterId)}&per_page=${String(perPage)}`;
});
const CRAWLERS = 16;

let sandbox: Sandbox;
let redis: RedisServer;
let crawlerToken: string;
let readerToken: string;

beforeAll(async () => {
  sandbox = await startSandbox();
  redis = await startRedis();
  await settledOperatorState(redis);
  crawlerToken = await token({ company: LARGE_COMPANY });
  readerToken = await token({ company: 2 });
});

afterAll(async () => {
  await sandbox.close();
  await redis.stop();
});

/** B's reads, one at a time, `rounds` times over its hot pages: the share of them that were hits. */
async function readerRounds(proxy: ProxyHandle, rounds: number, stop: () => boolean = () => true): Promise<number> {
  let reads = 0;
  let hits = 0;
  // At least `rounds` rounds, and on until `stop()` says so.
  for (let round = 0; round < rounds || !stop(); round++) {
    for (const target of HOT) {
      const res = await getWithToken(proxy.url, target, readerToken);
      expect(res.status).toBe(200);
      reads += 1;
      if (/; hit;/.test(res.headers['cache-status'] ?? '')) hits += 1;
    }
  }
  return hits / reads;
}

/** A's crawl, `CRAWLERS` requests at a time, every page `times` times in a row. */
async function crawl(proxy: ProxyHandle, times = 1): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: CRAWLERS }, async () => {
      for (let i = next++; i < CRAWL.length; i = next++) {
        for (let time = 0; time < times; time++) {
          const res = await getWithToken(proxy.url, CRAWL[i] ?? '', crawlerToken);
          expect(res.status).toBe(200);
        }
      }
    }),
  );
}

/** The L1's hits and lookups so far (`slab_proxy_l1_lookups_total`). */
async function l1Lookups(proxy: ProxyHandle): Promise<{ readonly hits: number; readonly all: number }> {
  const metrics = parseExposition((await send(proxy.adminUrl ?? '', '/metrics')).text);
  const hits = metrics.value('slab_proxy_l1_lookups_total', { result: 'hit' });
  return { hits, all: hits + metrics.value('slab_proxy_l1_lookups_total', { result: 'miss' }) };
}

/** B's L1 hit share over `rounds` rounds of its own, and nothing else read meanwhile. */
async function l1HitShare(proxy: ProxyHandle, rounds: number): Promise<number> {
  const before = await l1Lookups(proxy);
  await readerRounds(proxy, rounds);
  const after = await l1Lookups(proxy);
  return (after.hits - before.hits) / (after.all - before.all);
}

describe("beside another company's crawl, the in-process store", () => {
  let proxy: ProxyHandle;
  beforeAll(async () => {
    proxy = await startProxy({
      upstreamUrl: sandbox.url,
      config: { cache: { ...LONG_LIVED, memory: { maxBytes: TIER_BYTES } } },
    });
  });
  afterAll(() => proxy.close());

  it.each([1, 2])(
    "keeps at least 95% of B's hit share alone while A crawls many times what it holds, each page %i×",
    {
      timeout: 60_000,
    },
    async (times) => {
      await readerRounds(proxy, 1); // warm: B's pages enter
      const alone = await readerRounds(proxy, 2);
      expect(alone).toBe(1);
      let crawled = false;
      const crawling = crawl(proxy, times).then(() => {
        crawled = true;
      });
      const beside = await readerRounds(proxy, 2, () => crawled);
      await crawling;
      expect(beside).toBeGreaterThanOrEqual(0.95 * alone);
    },
  );
});

describe("beside another company's crawl, the L1 in front of Redis", () => {
  let proxy: ProxyHandle;
  beforeAll(async () => {
    proxy = await startProxy({
      upstreamUrl: sandbox.url,
      redisUrl: redis.url,
      adminToken: 'noisy-neighbour-admin-token-of-some-length',
      config: { cache: { ...LONG_LIVED, l1: { maxBytes: TIER_BYTES, ttl: 60 } } },
    });
    // Measured once the change channel vouches for the L1: its first verdict distrusts every copy
    // set before it (docs/cache.md#the-l1), which would count as misses of B's, not the crawl's.
    await until(async () => {
      const metrics = parseExposition((await send(proxy.adminUrl ?? '', '/metrics')).text);
      return metrics.value('slab_proxy_l1_channel_told', {}) === 1;
    }, 'the change channel told');
  });
  afterAll(() => proxy.close());

  it.each([1, 2])(
    "keeps at least 95% of B's L1 hit share alone once A has crawled many times what it holds, each page %i×",
    {
      timeout: 60_000,
    },
    async (times) => {
      await readerRounds(proxy, 1); // warm: B's pages enter
      const alone = await l1HitShare(proxy, 2);
      expect(alone).toBe(1);
      let crawled = false;
      const crawling = crawl(proxy, times).then(() => {
        crawled = true;
      });
      await readerRounds(proxy, 1, () => crawled);
      await crawling;
      expect(await l1HitShare(proxy, 1)).toBeGreaterThanOrEqual(0.95 * alone);
    },
  );
});
