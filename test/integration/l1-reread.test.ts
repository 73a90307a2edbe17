/**
 * The L1 in front of a real Redis keeps a page in steady demand: its copy is read from the store
 * again before it expires (src/cache/stores/l1.ts, `dueForReread`: confirmed by its stored prefix, the
 * body not read again while it is unchanged), so that over several L1 lifetimes of
 * continuous requests the L1 misses once (the first request) and no hit waits for Redis; and
 * requests that miss the L1 together share one store read.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FLAG_AHEAD, FLAGS_OFFSET } from '../../src/cache/entry/entry.js';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { commandCalls, type RedisServer, startRedis } from '../helpers/redis.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

const ADMIN_TOKEN = 'l1-reread-admin-token-of-some-length';
/** L1 lifetimes the steady load lasts. */
const LIFETIMES = 3;
const L1_TTL_SECONDS = 0.5;

let redis: RedisServer;
let sandbox: Sandbox;
let proxy: ProxyHandle;
let bearer: string;

/** A counter of the proxy's `/metrics`, by its full series name. */
async function counter(series: string): Promise<number> {
  const text = (await send(proxy.adminUrl ?? '', '/metrics')).body.toString('utf8');
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return Number(line?.slice(series.length + 1) ?? Number.NaN);
}

/** Commands Redis has run of one kind. */
async function redisCalls(command: string): Promise<number> {
  const admin = new Redis(redis.url);
  const calls = await commandCalls(admin, command);
  admin.disconnect();
  return calls;
}

beforeAll(async () => {
  redis = await startRedis();
  await settledOperatorState(redis);
  sandbox = await startSandbox();
  bearer = await token();
  proxy = await startProxy({
    upstreamUrl: sandbox.url,
    redisUrl: redis.url,
    adminToken: ADMIN_TOKEN,
    config: { cache: { defaults: { ttl: 300 }, l1: { ttl: L1_TTL_SECONDS } } },
  });
});
afterAll(async () => {
  await proxy.close();
  await sandbox.close();
  await redis.stop();
});

describe('the L1 under steady demand', () => {
  it('keeps a hot page through several of its lifetimes: one L1 miss, one confirmation per lifetime, no body read', async () => {
    const target = `${API_PREFIX}/receipts?per_page=7`;
    expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
    const missesBefore = await counter('slab_proxy_l1_lookups_total{result="miss"}');
    const readsBefore = await redisCalls('mget');
    const confirmationsBefore = await redisCalls('getrange');
    const until = Date.now() + LIFETIMES * L1_TTL_SECONDS * 1000;
    let hits = 0;
    while (Date.now() < until) {
      const res = await getWithToken(proxy.url, target, bearer);
      expect(res.headers['cache-status']).toMatch(/^slab-proxy; hit; ttl=\d+$/);
      hits += 1;
    }
    expect(hits).toBeGreaterThan(LIFETIMES * 10);
    // Every one of them from the L1: its copy was read again before it expired.
    expect(await counter('slab_proxy_l1_lookups_total{result="miss"}')).toBe(missesBefore);
    // About one confirmation per lifetime, not one per request, and the page itself never read
    // again: the copy held is still what is stored (its stored prefix unchanged).
    const confirmations = (await redisCalls('getrange')) - confirmationsBefore;
    expect(confirmations).toBeGreaterThanOrEqual(LIFETIMES - 1);
    expect(confirmations).toBeLessThanOrEqual(LIFETIMES + 2);
    expect(await redisCalls('mget')).toBe(readsBefore);
    expect(sandbox.stats().served).toBe(1);
  });

  it('replaces a copy whose stored form changed (a flag alone), and confirms the new one from then on', async () => {
    const target = `${API_PREFIX}/receipts?per_page=9`;
    expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
    // The stored entry marked as a page fetched ahead (the flags byte, src/cache/entry/entry.ts): the
    // same response, another stored form than the copy the L1 holds.
    const admin = new Redis(redis.url);
    const [key] = await admin.keys('*list:per_page=9');
    if (key === undefined) throw new Error('the page is not stored');
    const flags = (await admin.getrangeBuffer(key, FLAGS_OFFSET, FLAGS_OFFSET))[0] ?? 0;
    await admin.setrange(key, FLAGS_OFFSET, Buffer.from([flags | FLAG_AHEAD]));
    admin.disconnect();
    const steady = async (lifetimes: number): Promise<void> => {
      const until = Date.now() + lifetimes * L1_TTL_SECONDS * 1000;
      while (Date.now() < until) expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
    };
    // Read whole once or twice (the flag, then the take that clears it: src/cache/prefetch/prefetcher.ts)…
    await steady(LIFETIMES);
    // …and then only confirmed: the copy is the store's again.
    const readsBefore = await redisCalls('mget');
    const confirmationsBefore = await redisCalls('getrange');
    await steady(LIFETIMES);
    expect(await redisCalls('mget')).toBe(readsBefore);
    expect((await redisCalls('getrange')) - confirmationsBefore).toBeGreaterThanOrEqual(LIFETIMES - 1);
  });

  it('shares one store read among requests that miss the L1 together', async () => {
    const target = `${API_PREFIX}/transfers?per_page=3`;
    const other = await startProxy({
      upstreamUrl: sandbox.url,
      redisUrl: redis.url,
      config: { cache: { defaults: { ttl: 300 }, l1: { ttl: L1_TTL_SECONDS } } },
    });
    try {
      // Filled through the first proxy: the second has nothing in its L1.
      expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
      const readsBefore = await redisCalls('mget');
      const answers = await Promise.all(Array.from({ length: 20 }, () => getWithToken(other.url, target, bearer)));
      for (const res of answers) expect(res.headers['cache-status']).toMatch(/^slab-proxy; hit; ttl=\d+$/);
      // Twenty requests that found the L1 empty together: one read of the store, not twenty.
      expect((await redisCalls('mget')) - readsBefore).toBeLessThanOrEqual(2);
    } finally {
      await other.close();
    }
  });
});
