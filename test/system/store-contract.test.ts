/**
 * One contract for every `CacheStore` (after undici's cache-store tests): the in-process store, and
 * the Redis store against a real `redis-server` and a real Redis Cluster. Then what only Redis can
 * do to a store: corrupt bytes, a killed server, a hung server, and the recovery; and what a
 * freshen sends it (the prefix, never the body).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { type CacheAddress, cacheAddress, markKeys } from '../../src/cache/entry/cache-key.js';
import { brotliBody, type CacheEntry, ENTRY_FORMAT_VERSION, encodeEntry } from '../../src/cache/entry/entry.js';
import { asOfMarks, listsMark, newMark } from '../../src/cache/entry/marks.js';
import { createMemoryStore } from '../../src/cache/stores/memory-store.js';
import { createRedisStore } from '../../src/cache/stores/redis-store.js';
import { type CacheStore, isCurrent } from '../../src/cache/stores/store.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { createRedisClient, type RedisClient } from '../../src/platform/redis/connection.js';
import { RedisHealth } from '../../src/platform/redis/health.js';
import { canonicaliseTarget } from '../helpers/canonicalise.js';
import { testPrincipal } from '../helpers/principals.js';
import { clientReady, commandCalls, type RedisServer, startRedis } from '../helpers/redis.js';
import { type RedisCluster, startRedisCluster } from '../support/redis-cluster.js';

function principal(company: string): Principal {
  return testPrincipal({ company, subject: company, permissions: new Set() });
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
  /** The store's expiry clock now. */
  now(): number;
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

    it('marks a group’s lists and the records named stale, and nothing else', async () => {
      const list = address('stocktakes?per_page=8', '7');
      const record = address('stocktakes/81', '7');
      const otherRecord = address('stocktakes/82', '7');
      const otherCompany = address('stocktakes?per_page=8', '8');
      const keys = markKeys('test', list.group);
      expect((await subject.store.lookup(list)).mark ?? '').toBe('');
      const mark = newMark(subject.now());
      const stored = await subject.store.invalidate({
        keys,
        mark,
        listsMark: listsMark(mark, '81'),
        records: ['81'],
        keepMs: 60_000,
      });
      expect(stored).toBe(true);
      // The lists' mark names the record (docs/cache.md#window-marks).
      expect((await subject.store.lookup(list)).mark).toBe(`${mark}=81`);
      expect((await subject.store.lookup(record)).mark).toBe(`/${mark}`);
      expect((await subject.store.lookup(otherRecord)).mark ?? '').toBe('');
      expect((await subject.store.lookup(otherCompany)).mark ?? '').toBe('');
      // The whole resource: every record page, and the lists again.
      const all = newMark(subject.now() + 1);
      await subject.store.invalidate({ keys, mark: all, listsMark: all, records: undefined, keepMs: 60_000 });
      expect((await subject.store.lookup(list)).mark).toBe(`${all} ${mark}=81`);
      expect((await subject.store.lookup(record)).mark).toBe(`${all}/${mark}`);
      expect((await subject.store.lookup(otherRecord)).mark).toBe(`${all}/`);
    });

    it('keeps an entry through an invalidation, stale from its mark on; one filled under the mark is fresh', async () => {
      const a = address('stocktakes?per_page=9', '6');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      const at = subject.now();
      await subject.store.save(a, { ...entry(generation, '{"v":1}', 60_000, at), freshUntil: at + 30_000 });
      const mark = newMark(at + 5);
      await subject.store.invalidate({
        keys: markKeys('test', a.group),
        mark,
        listsMark: listsMark(mark, '1'),
        records: ['1'],
        keepMs: 1_000,
      });
      const found = await subject.store.lookup(a);
      expect(isCurrent(found)).toBe(true);
      if (!isCurrent(found)) return;
      expect(asOfMarks(found.entry, found.mark).freshUntil).toBe(at + 5);
      // A freshen under the new mark (its header grows): fresh again, body kept.
      const fresher = { ...found.entry, storedAt: at + 10, freshUntil: at + 30_010, keepUntil: at + 60_010, mark };
      expect(await subject.store.freshen(a, found.entry, fresher)).toBe('freshened');
      const again = await subject.store.lookup(a);
      if (!isCurrent(again)) throw new Error('kept');
      expect(again.entry.mark).toBe(mark);
      expect(again.entry.body.toString()).toBe('{"v":1}');
      expect(asOfMarks(again.entry, again.mark)).toBe(again.entry);
    });

    it('lets a record’s mark go after its keepMs, the lists’ never', async () => {
      const list = address('stocktakes?per_page=10', '9');
      const record = address('stocktakes/91', '9');
      const mark = newMark(subject.now());
      const keys = markKeys('test', list.group);
      await subject.store.invalidate({ keys, mark, listsMark: listsMark(mark, '91'), records: ['91'], keepMs: 200 });
      expect((await subject.store.lookup(record)).mark).toBe(`/${mark}`);
      await subject.advance(400);
      expect((await subject.store.lookup(record)).mark ?? '').toBe('');
      expect((await subject.store.lookup(list)).mark).toBe(`${mark}=91`);
    });

    it('keeps a list page fresh through a change its keyset window cannot hold, stale from one it can', async () => {
      const a = address('stocktakes?after_id=100&per_page=9', '5');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      const at = subject.now();
      // Ids 101–109, more after it: a change of 50 or 150 cannot change it, one of 105 can.
      const window = { after: 100, last: 109, more: true };
      await subject.store.save(a, { ...entry(generation, '{"v":1}', 60_000, at), freshUntil: at + 30_000, window });
      const keys = markKeys('test', a.group);
      const outside = newMark(at + 5);
      await subject.store.invalidate({
        keys,
        mark: outside,
        listsMark: listsMark(outside, '50,150'),
        records: ['50', '150'],
        keepMs: 60_000,
      });
      const kept = await subject.store.lookup(a);
      if (!isCurrent(kept)) throw new Error('kept');
      expect(kept.entry.window).toEqual(window);
      expect(asOfMarks(kept.entry, kept.mark)).toBe(kept.entry);
      const inside = newMark(at + 7);
      await subject.store.invalidate({
        keys,
        mark: inside,
        listsMark: listsMark(inside, '105'),
        records: ['105'],
        keepMs: 60_000,
      });
      const marked = await subject.store.lookup(a);
      if (!isCurrent(marked)) throw new Error('kept');
      expect(asOfMarks(marked.entry, marked.mark).freshUntil).toBe(at + 7);
    });

    it('forgets an entry at its keepUntil', async () => {
      const a = address('receipts?per_page=7');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      await subject.store.save(a, entry(generation, '{"short":true}', 200, subject.now()));
      expect((await subject.store.lookup(a)).entry).toBeDefined();
      await subject.advance(400);
      expect((await subject.store.lookup(a)).entry).toBeUndefined();
    });

    it('freshens an entry in place: new times and expiry, the same body and client ETag, byte for byte', async () => {
      for (const body of ['{"data":{}}', BIG_BODY]) {
        const a = address(`receipts?per_page=20&shipment_id=${body.length}`);
        const generation = (await subject.store.ensureGeneration(a)) ?? '';
        const at = subject.now();
        await subject.store.save(a, { ...entry(generation, body, 300, at), upstreamEtag: '"u1"' });
        const held = (await subject.store.lookup(a)).entry;
        if (held === undefined) throw new Error('saved');
        const fresher: CacheEntry = {
          ...held,
          storedAt: at + 100,
          freshUntil: at + 5_000,
          keepUntil: at + 60_000,
          upstreamEtag: '"u1"',
        };
        expect(await subject.store.freshen(a, held, fresher)).toBe('freshened');
        const found = await subject.store.lookup(a);
        expect(found.entry).toEqual(fresher);
        expect(found.entry?.body.equals(Buffer.from(body))).toBe(true);
        expect(found.entry?.etag).toBe(held.etag);
        expect(isCurrent(found)).toBe(true);
        // The expiry moved with keepUntil: the entry outlives the 300 ms it was saved for.
        await subject.advance(500);
        expect((await subject.store.lookup(a)).entry?.storedAt).toBe(at + 100);
      }
    });

    it('freshens with the upstream’s validators changed, whatever their length', async () => {
      const a = address('receipts?per_page=21');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      await subject.store.save(a, { ...entry(generation, BIG_BODY, 60_000, subject.now()), upstreamEtag: '"u1"' });
      for (const validators of [
        { upstreamEtag: '"u2"', lastModified: undefined },
        { upstreamEtag: 'W/"a-longer-one"', lastModified: 'Tue, 03 Nov 2026 10:00:00 GMT' },
        { upstreamEtag: undefined, lastModified: undefined },
      ]) {
        const held = (await subject.store.lookup(a)).entry;
        if (held === undefined) throw new Error('saved');
        const fresher: CacheEntry = {
          ...held,
          ...validators,
          storedAt: held.storedAt + 1,
          freshUntil: held.freshUntil + 1,
        };
        expect(await subject.store.freshen(a, held, fresher)).toBe('freshened');
        const found = (await subject.store.lookup(a)).entry;
        expect(found).toEqual(fresher);
        expect(found?.body.toString()).toBe(BIG_BODY);
      }
    });

    it('writes nothing when the entry changed since it was read (a fill or a freshen came first)', async () => {
      const a = address('receipts?per_page=22');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      const at = subject.now();
      await subject.store.save(a, entry(generation, '{"v":1}', 60_000, at));
      const held = (await subject.store.lookup(a)).entry;
      if (held === undefined) throw new Error('saved');
      const fresher = { ...held, storedAt: at + 10, freshUntil: at + 9_000, keepUntil: at + 90_000 };
      // Another replica's fill of another body meanwhile.
      const newer = entry(generation, '{"v":2}', 60_000, at + 5);
      await subject.store.save(a, newer);
      expect(await subject.store.freshen(a, held, fresher)).toBe('changed');
      expect((await subject.store.lookup(a)).entry).toEqual(newer);
      // Another freshen meanwhile: the same body, other times.
      const current = (await subject.store.lookup(a)).entry;
      if (current === undefined) throw new Error('saved');
      const first = { ...current, storedAt: at + 20, freshUntil: at + 9_000, keepUntil: at + 90_000 };
      expect(await subject.store.freshen(a, current, first)).toBe('freshened');
      expect(await subject.store.freshen(a, current, { ...first, storedAt: at + 30 })).toBe('changed');
      expect((await subject.store.lookup(a)).entry).toEqual(first);
      // Not a freshening at all (another body, so another ETag): nothing written either.
      const other = { ...first, storedAt: at + 40, etag: '"other"', body: Buffer.from('{"v":33}') };
      expect(await subject.store.freshen(a, first, other)).toBe('changed');
      expect((await subject.store.lookup(a)).entry).toEqual(first);
    });

    it('writes nothing when the entry is gone', async () => {
      const a = address('receipts?per_page=23');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      const at = subject.now();
      await subject.store.save(a, entry(generation, '{"gone":true}', 200, at));
      const held = (await subject.store.lookup(a)).entry;
      if (held === undefined) throw new Error('saved');
      await subject.advance(400);
      const fresher = { ...held, storedAt: at + 400, freshUntil: at + 9_000, keepUntil: at + 90_000 };
      expect(await subject.store.freshen(a, held, fresher)).toBe('missing');
      expect((await subject.store.lookup(a)).entry).toBeUndefined();
    });

    it('takes a page fetched ahead once: the first caller clears its flag, its expiry kept; nothing else is taken', async () => {
      const a = address('receipts?per_page=24');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      const at = subject.now();
      const ahead: CacheEntry = { ...entry(generation, BIG_BODY, 300, at), ahead: true };
      await subject.store.save(a, ahead);
      expect((await subject.store.lookup(a)).entry?.ahead).toBe(true);
      const takers = await Promise.all([1, 2, 3].map(() => subject.store.takeAhead(a)));
      expect(takers.filter(Boolean)).toHaveLength(1);
      expect(await subject.store.takeAhead(a)).toBe(false);
      const taken = (await subject.store.lookup(a)).entry;
      expect(taken?.ahead).toBeUndefined();
      expect(taken?.body.toString()).toBe(BIG_BODY);
      expect(taken?.storedAt).toBe(at);
      // Nothing to take: an entry that was not fetched ahead, or none at all.
      const b = address('receipts?per_page=25');
      await subject.store.save(b, entry(generation, '{"own":true}', 60_000, at));
      expect(await subject.store.takeAhead(b)).toBe(false);
      expect(await subject.store.takeAhead(address('receipts?per_page=26'))).toBe(false);
      // Its expiry as saved, not lengthened by the take.
      await subject.advance(400);
      expect((await subject.store.lookup(a)).entry).toBeUndefined();
    });

    it('freshens a page fetched ahead that a request took after it was read (the flag is no part of the response)', async () => {
      const a = address('receipts?per_page=27');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      const at = subject.now();
      await subject.store.save(a, { ...entry(generation, BIG_BODY, 60_000, at), ahead: true, upstreamEtag: '"u1"' });
      const held = (await subject.store.lookup(a)).entry;
      if (held === undefined) throw new Error('saved');
      expect(await subject.store.takeAhead(a)).toBe(true);
      const fresher: CacheEntry = { ...held, ahead: undefined, storedAt: at + 10, freshUntil: at + 9_000 };
      expect(await subject.store.freshen(a, held, fresher)).toBe('freshened');
      const found = (await subject.store.lookup(a)).entry;
      expect(found?.freshUntil).toBe(at + 9_000);
      expect(found?.ahead).toBeUndefined();
      expect(await subject.store.takeAhead(a)).toBe(false);
    });

    it('answers a lookup given the copy held with that copy while it is what is stored, else with what is', async () => {
      const a = address('receipts?per_page=28');
      const generation = (await subject.store.ensureGeneration(a)) ?? '';
      const at = subject.now();
      await subject.store.save(a, entry(generation, BIG_BODY, 60_000, at));
      const held = (await subject.store.lookup(a)).entry;
      if (held === undefined) throw new Error('saved');
      const confirmed = await subject.store.lookup(a, held);
      expect(confirmed.entry).toBe(held);
      expect(confirmed.generation).toBe(generation);
      expect(isCurrent(confirmed)).toBe(true);
      // Freshened since: the store's times, not the copy's.
      expect(await subject.store.freshen(a, held, { ...held, freshUntil: at + 9_000 })).toBe('freshened');
      const freshened = (await subject.store.lookup(a, held)).entry;
      expect(freshened).not.toBe(held);
      expect(freshened?.freshUntil).toBe(at + 9_000);
      // Filled again since: the new entry.
      await subject.store.save(a, entry(generation, '{"v":2}', 60_000, at + 5));
      const replaced = (await subject.store.lookup(a, freshened)).entry;
      expect(replaced?.body.toString()).toBe('{"v":2}');
      // Purged since: the copy is still what is stored, but no longer current.
      const after = await subject.store.purge(a.group);
      const purged = await subject.store.lookup(a, replaced);
      expect(purged.generation).toBe(after);
      expect(isCurrent(purged)).toBe(false);
      // Gone (another key, nothing stored): nothing.
      expect((await subject.store.lookup(address('receipts?per_page=29'), held)).entry).toBeUndefined();
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
const clock = (): number => Date.now() + ahead;
contract('memory', () =>
  Promise.resolve({
    store: createMemoryStore({ maxBytes: 1_048_576, now: clock }),
    now: clock,
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
    now: Date.now,
    // Redis expires keys by its own clock: the wait is the subject here, not a stand-in for an event.
    advance: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  }),
);

/** A real Redis Cluster (3 masters, 3 replicas): every operation is on one key's slot. */
let cluster: RedisCluster;
let clusterClient: RedisClient;
beforeAll(async () => {
  cluster = await startRedisCluster();
  clusterClient = createRedisClient({ clusterNodes: cluster.seeds.split(','), commandTimeoutMs: 100 });
  await clientReady(clusterClient);
}, 60_000);
afterAll(async () => {
  clusterClient.disconnect();
  await cluster.stop();
});

contract('redis cluster', () =>
  Promise.resolve({
    store: createRedisStore({
      client: clusterClient,
      health: new RedisHealth(clusterClient, { suspendMs: 1_000 }),
      prefix: 'test',
    }),
    now: Date.now,
    advance: (ms) => new Promise((resolve) => setTimeout(resolve, ms)),
  }),
);

describe('a freshen on Redis', () => {
  it('sends the entry’s prefix and 24 bytes of times, never its body, and writes them with SETRANGE', async () => {
    const sent: Array<{ readonly command: string; readonly bytes: number }> = [];
    const size = (args: unknown[]): number =>
      args.reduce<number>((n, arg) => n + (Buffer.isBuffer(arg) ? arg.length : String(arg).length), 0);
    // The client as the store sees it, measuring what each script call carries.
    const measured = new Proxy(client, {
      get(target, property, receiver) {
        if (property === 'eval' || property === 'evalsha')
          return (...args: unknown[]) => {
            sent.push({ command: property, bytes: size(args) });
            return (target[property] as (...a: unknown[]) => Promise<unknown>)(...args);
          };
        return Reflect.get(target, property, receiver) as unknown;
      },
    });
    await client.script('FLUSH');
    const store = createRedisStore({ client: measured, health, prefix: 'test' });
    const a = address('transfers?per_page=30');
    const body = JSON.stringify({
      data: Array.from({ length: 300 }, (_, i) => ({ id: i, note: `n${String(i * 7919)}` })),
      meta: {},
    });
    expect(body.length).toBeGreaterThan(5_000);
    const generation = (await store.ensureGeneration(a)) ?? '';
    await store.save(a, { ...entry(generation, body), brotli: undefined });
    const held = (await store.lookup(a)).entry;
    if (held === undefined) throw new Error('saved');
    const before = await commandCalls(client, 'setrange');
    expect(
      await store.freshen(a, held, { ...held, storedAt: held.storedAt + 1, freshUntil: held.freshUntil + 1 }),
    ).toBe('freshened');
    expect(await commandCalls(client, 'setrange')).toBe(before + 1);
    // The first on a node without the script: EVALSHA answers NOSCRIPT, and EVAL brings the text.
    expect(sent.map((s) => s.command)).toEqual(['evalsha', 'eval']);
    expect(sent[1]?.bytes).toBeLessThan(1_000);
    // Then by its SHA alone: the key, the prefix read, the 24 bytes of times, the offset and the expiry.
    const again = (await store.lookup(a)).entry;
    if (again === undefined) throw new Error('freshened');
    sent.length = 0;
    expect(await store.freshen(a, again, { ...again, storedAt: again.storedAt + 1 })).toBe('freshened');
    expect(sent.map((s) => s.command)).toEqual(['evalsha']);
    expect(sent[0]?.bytes).toBeLessThan(350);
    expect((await store.lookup(a)).entry?.body.toString()).toBe(body);
  });
});

describe('an L1 copy confirmed on Redis', () => {
  it('reads the stored prefix, the generation and the marks, never the body, while the copy is what is stored', async () => {
    const store = createRedisStore({ client, health, prefix: 'test' });
    const a = address('transfers?per_page=31');
    const generation = (await store.ensureGeneration(a)) ?? '';
    await store.save(a, entry(generation, BIG_BODY));
    const held = (await store.lookup(a)).entry;
    if (held === undefined) throw new Error('saved');
    const calls = (command: string): Promise<number> => commandCalls(client, command);
    const [mget, getrange] = [await calls('mget'), await calls('getrange')];
    for (let i = 0; i < 3; i++) expect((await store.lookup(a, held)).entry).toBe(held);
    expect(await calls('mget')).toBe(mget);
    expect(await calls('getrange')).toBe(getrange + 3);
    // Changed (a new fill): read whole once the prefix differs.
    await store.save(a, entry(generation, '{"v":3}', 60_000, held.storedAt + 1));
    expect((await store.lookup(a, held)).entry?.body.toString()).toBe('{"v":3}');
    expect(await calls('mget')).toBe(mget + 1);
  });
});

describe('the Redis store when Redis misbehaves', () => {
  it('treats corrupt or other-version bytes as no entry', async () => {
    const store = createRedisStore({ client, health, prefix: 'test' });
    const a = address('transfers?per_page=9');
    const valid = encodeEntry(entry('g', '{"v":1}'));
    const nextVersion = Buffer.from(valid);
    nextVersion.writeUInt8(ENTRY_FORMAT_VERSION + 1, 0);
    // Format 1's layout: [version][flags][u32 header length][header][body].
    const formatOne = Buffer.from([1, 0, 0, 0, 0, 2, 123, 125]);
    for (const junk of [Buffer.from('not an entry'), formatOne, nextVersion, Buffer.alloc(0)]) {
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
