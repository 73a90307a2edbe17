/**
 * One contract for every `CacheStore` (after undici's cache-store tests): the in-process store and
 * the Redis store against a real `redis-server`. Then what only Redis can do to a store: corrupt
 * bytes, a killed server, a hung server, and the recovery.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cacheAddress, type CacheAddress } from '../../src/cache/cache-key.js';
import { type CacheEntry, brotliBody } from '../../src/cache/entry.js';
import { createMemoryStore } from '../../src/cache/memory-store.js';
import { RedisHealth, createRedisClient, type RedisClient } from '../../src/platform/redis.js';
import { createRedisStore } from '../../src/cache/redis-store.js';
import { type CacheStore, isCurrent } from '../../src/cache/store.js';
import type { Principal } from '../../src/auth/principal.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { type RedisServer, clientReady, startRedis } from '../helpers/redis.js';

function principal(company: string): Principal {
  return {
    company,
    credential: `sub:${company}`,
    subject: company,
    tokenId: undefined,
    permissions: new Set(),
    employee: undefined,
    scope: undefined,
    modules: undefined,
    expiresAt: Date.now() / 1000 + 3600,
    tokenDigest: 'digest-of-a-token',
  };
}

function address(target: string, company = '1'): CacheAddress {
  const read = canonicaliseTarget(`/api/slab/v1/operations/${target}`);
  if (read instanceof ProxyError) throw new Error(read.code);
  return cacheAddress('test', read, principal(company), 'company');
}

function entry(generation: string, body: string, keepForMs = 60_000, at = Date.now()): CacheEntry {
  return {
    status: 200,
    contentType: 'application/json',
    etag: '"abc"',
    body: Buffer.from(body),
    // As the fill makes it: the brotli form beside the body, which both stores give back.
    brotli: brotliBody(Buffer.from(body), '"abc"'),
    storedAt: at,
    freshUntil: at + 1_000,
    keepUntil: at + keepForMs,
    generation,
  };
}

const BIG_BODY = JSON.stringify({
  data: Array.from({ length: 30 }, (_, i) => ({ id: i, status: 'available', warehouse_id: 7 })),
  meta: {},
});

interface StoreUnderTest {
  readonly store: CacheStore;
  /** Lets `ms` pass for the store's expiry clock. */
  advance(ms: number): Promise<void>;
}

function contract(name: string, make: () => Promise<StoreUnderTest>): void {
  describe(`CacheStore contract: ${name}`, () => {
    let subject: StoreUnderTest;
    beforeAll(async () => {
      subject = await make();
    });

    it('finds nothing, and no generation, in an empty group', async () => {
      const found = await subject.store.lookup(address('receipts?per_page=1'));
      expect(found).toEqual({ entry: undefined, generation: undefined, available: true });
    });

    it('creates a generation once and keeps it', async () => {
      const a = address('receipts?per_page=2');
      const first = await subject.store.ensureGeneration(a);
      expect(typeof first).toBe('string');
      expect(await subject.store.ensureGeneration(a)).toBe(first);
      expect((await subject.store.lookup(a)).generation).toBe(first);
    });

    it('returns what was saved, byte for byte, with its generation current', async () => {
      for (const body of ['{"data":{}}', BIG_BODY]) {
        const a = address(`receipts?per_page=3&shipment_id=${body.length}`);
        const generation = (await subject.store.ensureGeneration(a)) ?? '';
        const saved = entry(generation, body);
        expect(await subject.store.save(a, saved)).toBe(true);
        const found = await subject.store.lookup(a);
        expect(found.entry).toEqual(saved);
        expect(isCurrent(found)).toBe(true);
      }
    });

    it('replaces an entry saved again', async () => {
      const a = address('receipts?per_page=4');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      await subject.store.save(a, entry(generation, '{"v":1}'));
      await subject.store.save(a, entry(generation, '{"v":2}'));
      expect((await subject.store.lookup(a)).entry?.body.toString()).toBe('{"v":2}');
    });

    it('purges a group in one step: the entry stays, but is no longer current', async () => {
      const a = address('receipts?per_page=5');
      const before = (await subject.store.ensureGeneration(a)) ?? '';
      await subject.store.save(a, entry(before, '{"v":1}'));
      const after = await subject.store.purge(a.group);
      expect(after).not.toBe(before);
      const found = await subject.store.lookup(a);
      expect(found.generation).toBe(after);
      expect(isCurrent(found)).toBe(false);
    });

    it('purges only the group named: other companies and resources keep theirs', async () => {
      const mine = address('warehouses?per_page=6', '1');
      const otherCompany = address('warehouses?per_page=6', '2');
      const otherResource = address('remnants?per_page=6', '1');
      const generations = await Promise.all(
        [mine, otherCompany, otherResource].map((a) => subject.store.ensureGeneration(a)),
      );
      await subject.store.purge(mine.group);
      expect((await subject.store.lookup(otherCompany)).generation).toBe(generations[1]);
      expect((await subject.store.lookup(otherResource)).generation).toBe(generations[2]);
      expect((await subject.store.lookup(mine)).generation).not.toBe(generations[0]);
    });

    it('forgets an entry at its keepUntil', async () => {
      const a = address('receipts?per_page=7');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      await subject.store.save(a, entry(generation, '{"short":true}', 200));
      expect((await subject.store.lookup(a)).entry).toBeDefined();
      await subject.advance(400);
      expect((await subject.store.lookup(a)).entry).toBeUndefined();
    });

    it('does not keep an entry whose keepUntil has passed', async () => {
      const a = address('receipts?per_page=8');
      expect(await subject.store.save(a, entry('g', '{}', -1))).toBe(false);
      expect((await subject.store.lookup(a)).entry).toBeUndefined();
    });
  });
}

/**
 * The memory store's clock: the real one, moved ahead by `advance`. Entries are made on the real
 * clock; a clock frozen when this file loaded fell behind them whenever the suite started late (a
 * busy host), and an entry then outlived its keepUntil.
 */
let ahead = 0;
contract('memory', () =>
  Promise.resolve({
    store: createMemoryStore({ maxBytes: 1_048_576, now: () => Date.now() + ahead }),
    advance: (ms) => {
      ahead += ms;
      return Promise.resolve();
    },
  }),
);

let redis: RedisServer;
let client: RedisClient;
let health: RedisHealth;
/** The health breaker's clock: tests move it past a suspension instead of waiting it out. */
let healthClock = Date.now();
beforeAll(async () => {
  redis = await startRedis();
  client = createRedisClient({ url: redis.url, commandTimeoutMs: 100 });
  health = new RedisHealth(client, { suspendMs: 1_000, now: () => healthClock });
  await clientReady(client);
});
afterAll(async () => {
  client.disconnect();
  await redis.stop();
});

contract('redis', () =>
  Promise.resolve({
    store: createRedisStore({ client, health, prefix: 'test' }),
    // Redis expires keys by its own clock: the wait is the subject here, not a stand-in for an event.
    advance: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  }),
);

describe('the Redis store when Redis misbehaves', () => {
  it('treats corrupt or other-version bytes as no entry', async () => {
    const store = createRedisStore({ client, health, prefix: 'test' });
    const a = address('transfers?per_page=9');
    for (const junk of [Buffer.from('not an entry'), Buffer.from([2, 0, 0, 0, 0, 2, 123, 125]), Buffer.alloc(0)]) {
      await client.set(a.key, junk);
      const found = await store.lookup(a);
      expect(found.available).toBe(true);
      expect(found.entry).toBeUndefined();
    }
  });

  it('answers "unavailable" while Redis is hung, without throwing, then recovers', async () => {
    const store = createRedisStore({ client, health, prefix: 'test' });
    const a = address('transfers?per_page=10');
    redis.pause();
    try {
      expect((await store.lookup(a)).available).toBe(false);
      await expect(store.save(a, entry('g', '{}'))).resolves.toBe(false);
      expect(await store.ensureGeneration(a)).toBeUndefined();
      expect(health.state()).toBe('degraded');
    } finally {
      redis.resume();
    }
    // While suspended, the store is not even asked: an immediate "unavailable".
    expect((await store.lookup(a)).available).toBe(false);
    healthClock += 1_001;
    expect((await store.lookup(a)).available).toBe(true);
  });

  it('answers "unavailable" while Redis is down, then recovers by itself after a restart', async () => {
    const own = createRedisClient({ url: redis.url, commandTimeoutMs: 100 });
    await clientReady(own);
    let ownClock = Date.now();
    const ownHealth = new RedisHealth(own, { suspendMs: 1_000, now: () => ownClock });
    const store = createRedisStore({ client: own, health: ownHealth, prefix: 'test' });
    const a = address('transfers?per_page=11');
    await redis.kill();
    expect((await store.lookup(a)).available).toBe(false);
    expect(await store.purge(a.group)).toBeUndefined();
    // The next 'ready': a refused reconnection on the way is not a failure of the test.
    const reconnected = new Promise<void>((resolve) => own.once('ready', () => resolve()));
    await redis.restart();
    await reconnected;
    ownClock += 1_001; // past the failure suspension
    expect((await store.lookup(a)).available).toBe(true);
    own.disconnect();
    // The shared client of the other tests reconnects too.
    await clientReady(client);
  });
});
