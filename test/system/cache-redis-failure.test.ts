/**
 * Redis is best-effort (docs/cache.md#when-redis-fails): with the shared cache killed, hung
 * (SIGSTOP) or holding corrupt bytes, every read still answers 200; while Redis cannot be asked the
 * L1 is the replica's cache, so a page it held is served from it for as long as the page is fresh
 * (many L1 lifetimes) and never sent to the upstream, and a hung Redis is met once per page at most
 * (the node is skipped once found); a fill that meets a hung Redis pays its command timeout once;
 * and the cache comes back by
 * itself — without restarting the proxy — once Redis does. Real proxy, real sandbox, real
 * `redis-server`.
 */
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { pino } from 'pino';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { decodeEntry, ENTRY_FORMAT_VERSION } from '../../src/cache/entry/entry.js';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { listenOn } from '../../src/http/listen.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox, upstreamCount } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { parseExposition } from '../helpers/prometheus.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { until } from '../helpers/replicas.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';

/**
 * The Redis command timeout here, ms (the most the config allows): what a fill that meets a hung
 * Redis pays once (the per-node breaker then skips Redis), and what paying it for each command
 * would multiply.
 */
const COMMAND_TIMEOUT_MS = 100;

/**
 * Real freshness for every resource used here, far longer than any test; and the upstream budget's
 * opt-out (`budgetCutOff: share`), so that misses reach the upstream while Redis is away: this
 * suite is about the cache failing open. The default, which holds misses until every shared slot
 * must be over, is test/system/upstream-budget-partition.test.ts's.
 */
/** The L1's lifetime here, seconds: short, so that an outage outlasts many of them. */
const L1_TTL_SECONDS = 0.2;
const CACHE_CONFIG = {
  upstream: { budgetCutOff: 'share' },
  redis: { commandTimeoutMs: COMMAND_TIMEOUT_MS },
  cache: {
    l1: { ttl: L1_TTL_SECONDS },
    resources: {
      receipts: { ttl: 120 },
      remnants: { ttl: 120 },
      stocktakes: { ttl: 120 },
      fulfilments: { ttl: 120 },
    },
  },
};

const HIT = /^slab-proxy; hit; ttl=\d+$/;
const STORED = 'slab-proxy; fwd=miss; fwd-status=200; stored';
/** Forwarded and not kept: what a read gets while the store cannot be used. */
const UNSTORED_MISS = 'slab-proxy; fwd=miss; fwd-status=200';

let sandbox: Sandbox;
let readerToken: string;

beforeAll(async () => {
  sandbox = await startSandbox();
  readerToken = await token({ company: 1 });
});

afterAll(async () => {
  await sandbox.close();
});

afterEach(() => {
  sandbox.faults.clear();
});

function cacheStatus(res: RawResponse): string {
  return res.headers['cache-status'] ?? '';
}

/** The proxy's admin port's address, listening on a free port when it is not yet. */
async function adminUrl(proxy: ProxyHandle): Promise<string> {
  const server = proxy.app.adminServer;
  if (!server.listening) await listenOn(server, 0, '127.0.0.1');
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return `http://127.0.0.1:${String(port)}`;
}

/** Waits until the proxy's own readiness reports its Redis connection usable. */
async function redisUsable(proxy: ProxyHandle): Promise<void> {
  const admin = await adminUrl(proxy);
  // Redis usable, and the upstream budget on its shared ledger again: a replica back from its
  // share closes grants for a rejoin window (src/upstream-guard/upstream-budget.ts), which a fill started
  // meanwhile would wait out.
  await until(async () => {
    const ready = await send(admin, '/readyz');
    const body = ready.json() as { redis?: string; upstream_budget?: string };
    return ready.status === 200 && body.redis === 'ok' && body.upstream_budget === 'shared';
  }, 'the proxy to report redis ok and the budget shared');
}

/** The store lookups made on the request path so far (`slab_proxy_store_lookups_total`, every result). */
async function requestLookups(proxy: ProxyHandle): Promise<number> {
  const metrics = parseExposition((await send(await adminUrl(proxy), '/metrics')).text);
  return metrics.series('slab_proxy_store_lookups_total').reduce((sum, series) => sum + series.value, 0);
}

/** First read of a cold page: forwarded and stored; the second: a hit. */
async function warm(proxy: ProxyHandle, targets: readonly string[]): Promise<void> {
  for (const target of targets) {
    const first = await getWithToken(proxy.url, target, readerToken);
    expect(first.status).toBe(200);
    expect(cacheStatus(first)).toBe(STORED);
    const second = await getWithToken(proxy.url, target, readerToken);
    expect(cacheStatus(second)).toMatch(HIT);
  }
}

interface Sample {
  readonly phase: string;
  readonly target: string;
  readonly status: number;
  readonly cacheStatus: string;
  readonly error: string | undefined;
}

interface Traffic {
  readonly samples: Sample[];
  phase: string;
  inPhase(phase: string): Sample[];
  stop(): Promise<void>;
}

/** `loops` concurrent loops of sequential reads over `targets`, each sample tagged with the phase
 * that was current when its request started. A request that fails outright is a sample too. */
function startTraffic(url: string, targets: readonly string[], loops = 10): Traffic {
  let running = true;
  const traffic: Traffic = {
    samples: [],
    phase: 'steady',
    inPhase: (phase) => traffic.samples.filter((s) => s.phase === phase),
    async stop() {
      running = false;
      await Promise.all(workers);
    },
  };
  const workers = Array.from({ length: loops }, async (_, loop) => {
    for (let n = loop; running; n++) {
      const target = targets[n % targets.length] ?? '';
      const phase = traffic.phase;
      try {
        const res = await getWithToken(url, target, readerToken);
        traffic.samples.push({ phase, target, status: res.status, cacheStatus: cacheStatus(res), error: undefined });
      } catch (error) {
        traffic.samples.push({ phase, target, status: 0, cacheStatus: '', error: String(error) });
      }
    }
  });
  return traffic;
}

async function entryKeys(url: string, match: string): Promise<string[]> {
  const client = new Redis(url, { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await client.connect();
    const keys: string[] = [];
    let cursor = '0';
    do {
      const [next, batch] = await client.scan(cursor, 'MATCH', match, 'COUNT', 1000);
      cursor = next;
      // Entry keys only: not generations, leases, the inbound limiter's counters (`slab:rl:…`), or
      // the replicas' count.
      keys.push(
        ...batch.filter(
          (key) =>
            !key.endsWith(':gen') && !key.includes(':lease:') && !key.startsWith('slab:rl:') && key !== 'slab:replicas',
        ),
      );
    } while (cursor !== '0');
    return keys;
  } finally {
    client.disconnect();
  }
}

describe('Redis killed mid-traffic', () => {
  let redis: RedisServer;
  let proxy: ProxyHandle;
  beforeAll(async () => {
    redis = await startRedis();
    await settledOperatorState(redis);
    proxy = await startProxy({ upstreamUrl: sandbox.url, redisUrl: redis.url, config: CACHE_CONFIG });
    await redisUsable(proxy);
  });
  afterAll(async () => {
    await proxy.close();
    await redis.stop();
  });

  it('serves every page it held from the L1 while Redis is down, none from the upstream; then recovers by itself', async () => {
    const targets = [21, 22, 23, 24].map((n) => `${API_PREFIX}/receipts?per_page=${String(n)}`);
    await warm(proxy, targets);
    const traffic = startTraffic(proxy.url, targets);
    let upstreamBefore = 0;
    let upstreamDown = 0;
    try {
      await until(() => traffic.samples.length >= 50, 'steady traffic');
      upstreamBefore = targets.reduce((sum, t) => sum + upstreamCount(sandbox, t), 0);
      traffic.phase = 'down';
      await redis.kill();
      const downAt = Date.now();
      // Many L1 lifetimes: each copy's confirmation finds Redis unavailable, and the copy serves on.
      await until(
        () => traffic.inPhase('down').length >= 200 && Date.now() - downAt > 5 * L1_TTL_SECONDS * 1000,
        'five L1 lifetimes of traffic while Redis is down',
      );
      upstreamDown = targets.reduce((sum, t) => sum + upstreamCount(sandbox, t), 0);
      traffic.phase = 'restarted';
      await redis.restart();
      // Without restarting the proxy: its client reconnects, finds the pages gone (Redis restarted
      // empty), and the next fills are stored again.
      await until(
        () => traffic.inPhase('restarted').some((s) => s.cacheStatus === STORED),
        'a fill to be stored after the restart',
      );
    } finally {
      await traffic.stop();
    }

    const failures = traffic.samples.filter((s) => s.status !== 200);
    expect(failures).toEqual([]);
    // While Redis is down: every answer a hit from the L1, and the upstream asked nothing.
    const down = traffic.inPhase('down');
    expect(down.filter((s) => !HIT.test(s.cacheStatus))).toEqual([]);
    expect(upstreamDown).toBe(upstreamBefore);

    // The restarted Redis started empty: what it holds now, the proxy wrote after reconnecting.
    const stored = await entryKeys(redis.url, 'slab:*');
    expect(stored.length).toBeGreaterThan(0);
    // And reads are hits again.
    const recovered = traffic.inPhase('restarted').find((s) => s.cacheStatus === STORED);
    const again = await getWithToken(proxy.url, recovered?.target ?? '', readerToken);
    expect(again.status).toBe(200);
    expect(cacheStatus(again)).toMatch(HIT);
  });

  it('fetches a page it did not hold once while Redis is down, and serves it from the L1 after that', async () => {
    await redisUsable(proxy);
    await redis.kill();
    try {
      const target = `${API_PREFIX}/receipts?per_page=29`;
      const before = upstreamCount(sandbox, target);
      const first = await getWithToken(proxy.url, target, readerToken);
      expect(first.status).toBe(200);
      // Forwarded, and not claimed stored (RFC 9211 §2.7): the store could not be asked.
      expect(cacheStatus(first)).toBe(UNSTORED_MISS);
      for (let i = 0; i < 5; i++) {
        const again = await getWithToken(proxy.url, target, readerToken);
        expect(again.status).toBe(200);
        expect(cacheStatus(again)).toMatch(HIT);
        expect(again.text).toBe(first.text);
      }
      expect(upstreamCount(sandbox, target)).toBe(before + 1);
    } finally {
      await redis.restart();
    }
  });
});

interface LogLine {
  readonly time: number;
  readonly status: number;
  readonly cache?: string;
  readonly ms: number;
  readonly upstream_ms?: number;
}

describe('Redis paused (SIGSTOP) mid-traffic', () => {
  let redis: RedisServer;
  let proxy: ProxyHandle;
  const lines: LogLine[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    await settledOperatorState(redis);
    const destination = new Writable({
      write(chunk: Buffer, _encoding, done) {
        for (const text of chunk.toString('utf8').split('\n'))
          if (text.trim() !== '') lines.push(JSON.parse(text) as LogLine);
        done();
      },
    });
    proxy = await startProxy({
      upstreamUrl: sandbox.url,
      redisUrl: redis.url,
      config: CACHE_CONFIG,
      logger: pino({ level: 'info' }, destination),
    });
    await redisUsable(proxy);
  });
  afterAll(async () => {
    redis.resume();
    await proxy.close();
    await redis.stop();
  });

  function requestLines(from: number, to: number): LogLine[] {
    return lines.filter((line) => typeof line.ms === 'number' && line.time >= from && line.time <= to);
  }

  it('answers every read from the L1 while Redis hangs, no page asking it twice, then hits again after resume', async () => {
    const targets = [21, 22, 23, 24].map((n) => `${API_PREFIX}/remnants?per_page=${String(n)}`);
    await warm(proxy, targets);
    const traffic = startTraffic(proxy.url, targets);
    let lookupsBefore = 0;
    let lookupsPaused = 0;
    let upstreamBefore = 0;
    let upstreamPaused = 0;
    try {
      await until(() => traffic.samples.length >= 50, 'steady traffic');
      traffic.phase = 'paused';
      lookupsBefore = await requestLookups(proxy);
      upstreamBefore = targets.reduce((sum, t) => sum + upstreamCount(sandbox, t), 0);
      const pausedAt = Date.now();
      redis.pause();
      try {
        // Many L1 lifetimes: each copy's confirmation times out, and the copy serves on.
        await until(
          () => traffic.inPhase('paused').length >= 200 && Date.now() - pausedAt > 5 * L1_TTL_SECONDS * 1000,
          'five L1 lifetimes of traffic while Redis hangs',
        );
        upstreamPaused = targets.reduce((sum, t) => sum + upstreamCount(sandbox, t), 0);
        lookupsPaused = await requestLookups(proxy);
      } finally {
        traffic.phase = 'resumed';
        redis.resume();
      }
      // Hits again: the copies are confirmed against Redis once more.
      await until(
        () => targets.every((t) => traffic.inPhase('resumed').some((s) => s.target === t && HIT.test(s.cacheStatus))),
        'hits after resume',
      );
    } finally {
      await traffic.stop();
    }

    expect(traffic.samples.filter((s) => s.status !== 200)).toEqual([]);
    // Every answer while Redis hung was the L1's, and the upstream was asked nothing. A request
    // looks in the store only when its page's copy lapsed before anything found Redis hung (then
    // it meets the hang, and pays one command timeout): once found, the node is skipped and every
    // copy serves on without asking. One read per page at most is in flight at a time.
    expect(lookupsPaused - lookupsBefore).toBeLessThanOrEqual(targets.length);
    expect(traffic.inPhase('paused').filter((s) => !HIT.test(s.cacheStatus))).toEqual([]);
    expect(upstreamPaused).toBe(upstreamBefore);
  });

  it('a fill whose Redis hangs during the upstream exchange pays one command timeout, not one per command', async () => {
    const target = `${API_PREFIX}/stocktakes?per_page=17`;
    await redisUsable(proxy);
    // Cold key: lookup, lease and generation are done in Redis before the upstream is asked; the
    // upstream then takes 300 ms, and Redis hangs during that time. Left: saving the entry and
    // releasing the lease.
    sandbox.faults.set({ latencyMs: 300, resource: 'stocktakes', times: 1 });
    const startedAt = Date.now();
    const pending = getWithToken(proxy.url, target, readerToken);
    let res: RawResponse;
    try {
      await until(() => upstreamCount(sandbox, target) === 1, 'the upstream to receive the fill');
      redis.pause();
      res = await pending;
    } finally {
      redis.resume();
    }
    expect(res.status).toBe(200);
    const [line] = requestLines(startedAt, Date.now());
    expect(line).toBeDefined();
    // docs/cache.md#when-redis-fails: a command times out at `redis.commandTimeoutMs`, and after one
    // failure the per-node breaker skips Redis, so a hung Redis costs a request one timeout at most
    // (none, when another command met the hang first). The proxy's own time is then under two:
    // paying it for each of the commands left would cost two or more.
    const own = (line?.ms ?? 0) - (line?.upstream_ms ?? 0);
    expect(own, "the proxy's own time (ms - upstream_ms)").toBeLessThan(2 * COMMAND_TIMEOUT_MS);
  });
});

describe('corrupt entries in Redis', () => {
  let redis: RedisServer;
  const proxies: ProxyHandle[] = [];
  beforeAll(async () => {
    redis = await startRedis();
    await settledOperatorState(redis);
  });
  afterAll(async () => {
    await Promise.all(proxies.map((p) => p.close()));
    await redis.stop();
  });

  /** A proxy with an empty L1 on the shared Redis: what it serves comes from Redis or upstream. */
  async function freshProxy(): Promise<ProxyHandle> {
    const proxy = await startProxy({ upstreamUrl: sandbox.url, redisUrl: redis.url, config: CACHE_CONFIG });
    proxies.push(proxy);
    await redisUsable(proxy);
    return proxy;
  }

  it('treats garbage, other-version and truncated bytes as a miss, and replaces them', async () => {
    const target = `${API_PREFIX}/fulfilments?per_page=30`;
    const first = await freshProxy();
    await warm(first, [target]);
    const good = await getWithToken(first.url, target, readerToken);
    expect(upstreamCount(sandbox, target)).toBe(1);

    const keys = await entryKeys(redis.url, 'slab:*');
    expect(keys).toHaveLength(1);
    const key = keys[0] ?? '';
    const client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    try {
      const stored = await client.getBuffer(key);
      if (stored === null) throw new Error('the warmed entry is not in Redis');
      expect(decodeEntry(stored)?.body.toString('utf8')).toBe(good.text);
      const otherVersion = Buffer.from(stored);
      otherVersion.writeUInt8(ENTRY_FORMAT_VERSION + 1, 0);
      const corruptions: ReadonlyArray<readonly [string, Buffer]> = [
        ['garbage', Buffer.from('\u0000\u00ff not a cache entry at all \u00ff\u0000', 'latin1')],
        ['other format version', otherVersion],
        ['truncated', stored.subarray(0, Math.floor(stored.length * 0.75))],
      ];
      for (const [name, bytes] of corruptions) {
        await client.set(key, bytes, 'PX', 60_000);
        const before = upstreamCount(sandbox, target);
        const proxy = await freshProxy();
        const miss = await getWithToken(proxy.url, target, readerToken);
        expect(miss.status, name).toBe(200);
        expect(cacheStatus(miss), name).toBe(STORED);
        expect(miss.text, name).toBe(good.text);
        expect(upstreamCount(sandbox, target), name).toBe(before + 1);

        const hit = await getWithToken(proxy.url, target, readerToken);
        expect(hit.status, name).toBe(200);
        expect(cacheStatus(hit), name).toMatch(HIT);
        expect(hit.text, name).toBe(good.text);
        expect(upstreamCount(sandbox, target), name).toBe(before + 1);
        // The entry was replaced in Redis, not only in the L1: it decodes again.
        const replaced = await client.getBuffer(key);
        expect(replaced === null ? undefined : decodeEntry(replaced)?.body.toString('utf8'), name).toBe(good.text);
      }
    } finally {
      client.disconnect();
    }
  });
});
