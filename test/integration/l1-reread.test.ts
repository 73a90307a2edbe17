/**
 * The L1 in front of a real Redis keeps a page in steady demand, and no hit of it waits for Redis.
 * While the change channel vouches for it (every purge and invalidation heard:
 * src/cache/read/change-channel.ts), a copy serves for as long as its page is fresh with no
 * confirmation at all; a change whose announcement is lost is noticed within two heartbeats, and
 * the copy is not served past it; another replica's fill of the page has the copy confirmed and the
 * newer entry taken. While the channel cannot vouch (its sequence unreadable), the copy is read
 * from the store again before it expires (src/cache/stores/l1.ts, `dueForReread`: confirmed by its
 * stored prefix, the body not read again while it is unchanged), so that over several L1 lifetimes
 * of continuous requests the L1 misses once. Requests that miss the L1 together share one store read.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeSequenceKey, generationKey } from '../../src/cache/entry/cache-key.js';
import { FLAG_AHEAD, FLAGS_OFFSET } from '../../src/cache/entry/entry.js';
import { API_PREFIX } from '../../src/catalog/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { commandCalls, type RedisServer, startRedis } from '../helpers/redis.js';
import { until } from '../helpers/replicas.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

const ADMIN_TOKEN = 'l1-reread-admin-token-of-some-length';
/** L1 lifetimes the steady load lasts. */
const LIFETIMES = 3;
/**
 * The shipped L1 lifetime. A copy is confirmed from a point between half and a fifth of it before
 * it expires (src/cache/stores/l1.ts): a host may stall for up to 200 ms and a page in steady
 * demand still never drops out.
 */
const L1_TTL_SECONDS = 1;
/** Requests a lifetime at least: the steady load goes on until it has sent as many. */
const REQUESTS_PER_LIFETIME = 10;
const SEQUENCE_KEY = changeSequenceKey('slab');

let redis: RedisServer;
let admin: Redis;
let monitoring: Redis;
let sandbox: Sandbox;
let proxy: ProxyHandle;
let bearer: string;

/** A counter or gauge of the proxy's `/metrics`, by its full series name. */
async function metric(series: string): Promise<number> {
  const text = (await send(proxy.adminUrl ?? '', '/metrics')).body.toString('utf8');
  const line = text.split('\n').find((l) => l.startsWith(`${series} `));
  return Number(line?.slice(series.length + 1) ?? Number.NaN);
}

/** Commands Redis has run of one kind. */
function redisCalls(command: string): Promise<number> {
  return commandCalls(admin, command);
}

/**
 * Requests for `target`, one after another, each a hit, for `lifetimes` L1 lifetimes and at least
 * `REQUESTS_PER_LIFETIME` each (a slow host takes longer, never fewer): the lifetimes they took.
 */
async function steady(target: string, lifetimes: number): Promise<number> {
  const startedAt = performance.now();
  const elapsed = (): number => (performance.now() - startedAt) / (L1_TTL_SECONDS * 1000);
  for (let hits = 0; elapsed() < lifetimes || hits < lifetimes * REQUESTS_PER_LIFETIME; hits++) {
    const res = await getWithToken(proxy.url, target, bearer);
    expect(res.headers['cache-status']).toMatch(/^slab-proxy; hit; ttl=\d+$/);
  }
  return elapsed();
}

/** The proxy's heartbeats so far: its reads of the sequence (seen by MONITOR, inside its script). */
let heartbeatsSeen = 0;
function heartbeats(): Promise<number> {
  return Promise.resolve(heartbeatsSeen);
}

/** Resolves once the channel's verdict is `told`. */
function channelTold(told: boolean): Promise<void> {
  return until(
    async () => (await metric('slab_proxy_l1_channel_told')) === (told ? 1 : 0),
    `the channel told=${String(told)}`,
  );
}

beforeAll(async () => {
  redis = await startRedis();
  admin = new Redis(redis.url);
  const monitor = await admin.monitor();
  monitor.on('monitor', (_time: string, args: string[]) => {
    if (args[0]?.toLowerCase() === 'get' && args[1] === SEQUENCE_KEY) heartbeatsSeen += 1;
  });
  monitoring = monitor;
  await settledOperatorState(redis);
  sandbox = await startSandbox();
  bearer = await token();
  proxy = await startProxy({
    upstreamUrl: sandbox.url,
    redisUrl: redis.url,
    adminToken: ADMIN_TOKEN,
    config: {
      cache: {
        defaults: { ttl: 300 },
        l1: { ttl: L1_TTL_SECONDS },
        // A page that expires within a test, and is not refreshed ahead of it.
        resources: { remnants: { ttl: 1 } },
        refresh: { ahead: 0, maxConcurrent: 8 },
      },
    },
  });
});
afterAll(async () => {
  await proxy.close();
  await sandbox.close();
  admin.disconnect();
  monitoring.disconnect();
  await redis.stop();
});

describe('the L1 told by the change channel', () => {
  it('keeps a hot page through many L1 lifetimes: one L1 miss, no confirmation, no body read', async () => {
    await channelTold(true);
    const target = `${API_PREFIX}/receipts?per_page=4`;
    expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
    const missesBefore = await metric('slab_proxy_l1_lookups_total{result="miss"}');
    const readsBefore = await redisCalls('mget');
    const confirmationsBefore = await redisCalls('getrange');
    await steady(target, 2 * LIFETIMES);
    expect(await metric('slab_proxy_l1_lookups_total{result="miss"}')).toBe(missesBefore);
    expect(await redisCalls('getrange')).toBe(confirmationsBefore);
    expect(await redisCalls('mget')).toBe(readsBefore);
  });

  it('notices a purge whose announcement was lost within two heartbeats, and serves the page no longer', async () => {
    await channelTold(true);
    const target = `${API_PREFIX}/supplier-materials?per_page=4`;
    expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
    expect((await getWithToken(proxy.url, target, bearer)).headers['cache-status']).toMatch(/; hit;/);
    const served = sandbox.stats().served;
    const gapsBefore = await metric('slab_proxy_l1_channel_gaps_total{gap="missed"}');
    // A purge as a replica makes it, but its announcement lost: the new generation stored, the
    // sequence's number given out, nothing published.
    await admin.set(generationKey('slab', { company: '1', resource: 'supplier-materials' }), 'lost-purge');
    await admin.incr(SEQUENCE_KEY);
    // Two heartbeats, and one more that may have been under way when the number was given out.
    const beats = await heartbeats();
    await until(async () => (await heartbeats()) >= beats + 3, 'three heartbeats');
    expect(await metric('slab_proxy_l1_channel_gaps_total{gap="missed"}')).toBe(gapsBefore + 1);
    const after = await getWithToken(proxy.url, target, bearer);
    expect(after.headers['cache-status']).toMatch(/; fwd=miss/);
    expect(sandbox.stats().served).toBe(served + 1);
  });

  it("takes another replica's newer entry of a page it holds once that fill is announced", async () => {
    await channelTold(true);
    const target = `${API_PREFIX}/fulfilments?per_page=4`;
    expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
    const [key] = await admin.keys('*fulfilments*list:per_page=4');
    if (key === undefined) throw new Error('the page is not stored');
    // Another stored form of the page (the flags byte: src/cache/entry/entry.ts), as a fill
    // elsewhere makes one, and its release announced on the fills channel.
    const flags = (await admin.getrangeBuffer(key, FLAGS_OFFSET, FLAGS_OFFSET))[0] ?? 0;
    await admin.setrange(key, FLAGS_OFFSET, Buffer.from([flags | FLAG_AHEAD]));
    const readsBefore = await redisCalls('mget');
    await admin.publish('slab:fills', key);
    // The next hits are hits, and one of them has the copy confirmed: read whole, as it changed.
    await until(async () => {
      expect((await getWithToken(proxy.url, target, bearer)).headers['cache-status']).toMatch(/; hit;/);
      return (await redisCalls('mget')) > readsBefore;
    }, 'the newer entry read');
  });
});

describe('a copy held past its freshness', () => {
  it('is served stale at once while one refresh runs: no request reads the store meanwhile', async () => {
    await channelTold(true);
    const target = `${API_PREFIX}/remnants?per_page=6`;
    expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
    const filledAt = Date.now();
    await until(() => Date.now() > filledAt + 1_100, 'the page past its freshness');
    // The refresh takes 300 ms at the upstream: the requests meanwhile are served the held copy.
    sandbox.faults.set({ latencyMs: 300, resource: 'remnants', times: 1 });
    const served = sandbox.stats().served;
    const readsBefore = (await redisCalls('mget')) + (await redisCalls('getrange'));
    const answers = [];
    for (let i = 0; i < 10; i++) answers.push(await getWithToken(proxy.url, target, bearer));
    for (const answer of answers) expect(answer.headers['cache-status']).toMatch(/^slab-proxy; hit;/);
    expect(answers[0]?.headers['cache-status']).toMatch(/detail=stale-while-revalidate/);
    await until(() => sandbox.stats().served > served, 'the refresh at the upstream');
    // One store read: the refresh's own, once it held the lease.
    expect((await redisCalls('mget')) + (await redisCalls('getrange')) - readsBefore).toBeLessThanOrEqual(1);
    expect(sandbox.stats().served).toBe(served + 1);
  });
});

describe('the L1 without the channel’s verdict', () => {
  it('keeps a hot page through several of its lifetimes: one L1 miss, one confirmation per lifetime, no body read', async () => {
    // A sequence the heartbeat cannot read (another type at its key): no verdict.
    await admin.del(SEQUENCE_KEY);
    await admin.rpush(SEQUENCE_KEY, 'not a number');
    await channelTold(false);
    try {
      const target = `${API_PREFIX}/receipts?per_page=7`;
      expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
      const missesBefore = await metric('slab_proxy_l1_lookups_total{result="miss"}');
      const readsBefore = await redisCalls('mget');
      const confirmationsBefore = await redisCalls('getrange');
      const lifetimes = await steady(target, LIFETIMES);
      // Every one of them from the L1: its copy was read again before it expired.
      expect(await metric('slab_proxy_l1_lookups_total{result="miss"}')).toBe(missesBefore);
      // One confirmation every half to four fifths of a lifetime the load lasted (each copy is
      // confirmed from its key's own point on), not one per request, and the page itself never
      // read again: the copy held is still what is stored (its stored prefix unchanged).
      const confirmations = (await redisCalls('getrange')) - confirmationsBefore;
      expect(confirmations).toBeGreaterThanOrEqual(Math.floor(lifetimes) - 1);
      expect(confirmations).toBeLessThanOrEqual(2 * Math.ceil(lifetimes) + 1);
      expect(await redisCalls('mget')).toBe(readsBefore);
    } finally {
      await admin.del(SEQUENCE_KEY);
      await channelTold(true);
    }
  });

  it('replaces a copy whose stored form changed (a flag alone), and confirms the new one from then on', async () => {
    await admin.del(SEQUENCE_KEY);
    await admin.rpush(SEQUENCE_KEY, 'not a number');
    await channelTold(false);
    try {
      const target = `${API_PREFIX}/receipts?per_page=9`;
      expect((await getWithToken(proxy.url, target, bearer)).status).toBe(200);
      // The stored entry marked as a page fetched ahead (the flags byte, src/cache/entry/entry.ts): the
      // same response, another stored form than the copy the L1 holds.
      const [key] = await admin.keys('*list:per_page=9');
      if (key === undefined) throw new Error('the page is not stored');
      const flags = (await admin.getrangeBuffer(key, FLAGS_OFFSET, FLAGS_OFFSET))[0] ?? 0;
      await admin.setrange(key, FLAGS_OFFSET, Buffer.from([flags | FLAG_AHEAD]));
      // Read whole once or twice (the flag, then the take that clears it: src/cache/prefetch/prefetcher.ts)…
      await steady(target, LIFETIMES);
      // …and then only confirmed: the copy is the store's again.
      const readsBefore = await redisCalls('mget');
      const confirmationsBefore = await redisCalls('getrange');
      await steady(target, LIFETIMES);
      expect(await redisCalls('mget')).toBe(readsBefore);
      expect((await redisCalls('getrange')) - confirmationsBefore).toBeGreaterThanOrEqual(LIFETIMES - 1);
    } finally {
      await admin.del(SEQUENCE_KEY);
      await channelTold(true);
    }
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
