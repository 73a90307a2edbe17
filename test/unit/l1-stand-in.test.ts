/**
 * While the store cannot be asked, the L1 is the replica's cache (docs/cache.md#when-redis-fails):
 * the read service with an L1 in front of a store that can be switched off, and a fake origin.
 * A page held is served for as long as it is fresh, however many L1 lifetimes pass, without the
 * origin; past its freshness it is served stale while one conditional refresh runs, whose answer
 * the L1 then holds; a page never held is fetched once and then served from the L1; and when the
 * store answers again, a copy of a generation a purge made old meanwhile is never served.
 */

import { beforeEach, describe, expect, it } from 'vitest';
import { cacheAddress } from '../../src/cache/entry/cache-key.js';
import { LOCAL_COORDINATOR } from '../../src/cache/read/coordinator.js';
import type { Origin, OriginOutcome, ReadRequest, Validators } from '../../src/cache/read/origin.js';
import { CachePolicies } from '../../src/cache/read/policy.js';
import type { ReadOutcome } from '../../src/cache/read/read-outcome.js';
import { createReadService, type ReadService } from '../../src/cache/read/read-service.js';
import { L1Cache } from '../../src/cache/stores/l1.js';
import { createMemoryStore } from '../../src/cache/stores/memory-store.js';
import type { CacheStore } from '../../src/cache/stores/store.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { configWith } from '../helpers/env.js';
import { forwardingStore } from '../helpers/forwarding-store.js';
import { answered } from '../helpers/origin-answers.js';
import { testPrincipal } from '../helpers/principals.js';
import { readRequest } from '../helpers/read-request.js';

const PRINCIPAL = testPrincipal();
const PAGE = Buffer.from(JSON.stringify({ data: [{ id: 1 }], meta: { per_page: 1, has_more: false } }));
const NEWER = Buffer.from(JSON.stringify({ data: [{ id: 2 }], meta: { per_page: 1, has_more: false } }));
const L1_TTL_MS = 1_000;

function request(target: string): ReadRequest {
  return readRequest(target, PRINCIPAL);
}

/** A store that answers as an unreachable Redis does while `down`. */
function switchable(inner: CacheStore): CacheStore & { down: boolean } {
  // A remote store has no synchronous lane: every read goes through `lookup`.
  const { peek: _inProcessOnly, ...remote } = forwardingStore(inner);
  const store = {
    ...remote,
    kind: 'redis' as const,
    down: false,
    lookup: (address: Parameters<CacheStore['lookup']>[0], known?: Parameters<CacheStore['lookup']>[1]) =>
      store.down
        ? Promise.resolve({ entry: undefined, generation: undefined, available: false })
        : inner.lookup(address, known),
    ensureGeneration: (address: Parameters<CacheStore['ensureGeneration']>[0]) =>
      store.down ? Promise.resolve(undefined) : inner.ensureGeneration(address),
    save: (address: Parameters<CacheStore['save']>[0], entry: Parameters<CacheStore['save']>[1]) =>
      store.down ? Promise.resolve(false) : inner.save(address, entry),
    freshen: (...args: Parameters<CacheStore['freshen']>) =>
      store.down ? Promise.resolve('unavailable' as const) : inner.freshen(...args),
    purge: (group: Parameters<CacheStore['purge']>[0]) =>
      store.down ? Promise.resolve(undefined) : inner.purge(group),
  };
  return store;
}

let clock: number;
let store: CacheStore & { down: boolean };
let calls: Array<Validators | undefined>;
let answer: (validators: Validators | undefined) => OriginOutcome;
let refreshes: Array<Promise<void>>;
let reads: ReadService;

beforeEach(() => {
  clock = 1_800_000_000_000;
  calls = [];
  refreshes = [];
  answer = () => answered(PAGE, { etag: '"v1"', elapsedMs: 3 });
  store = switchable(createMemoryStore({ maxBytes: 1_048_576, now: () => clock }));
  const origin: Origin = (_request, validators) => {
    calls.push(validators);
    return Promise.resolve(answer(validators));
  };
  reads = createReadService({
    store,
    l1: new L1Cache({ maxBytes: 1_048_576, ttlMs: L1_TTL_MS, clock: { now: () => clock } }),
    coordinator: LOCAL_COORDINATOR,
    // 10 s fresh, then 20 s stale-while-revalidate, kept 100 s past freshness for stale-if-error.
    policies: new CachePolicies(
      configWith({ cache: { defaults: { ttl: 10, staleWhileRevalidate: 20, staleIfError: 100 } } }).cache,
    ),
    keyPrefix: 'test',
    fetch: origin,
    coalesceWaitMs: 100,
    now: () => clock,
    onBackgroundRefresh: (settled) => refreshes.push(settled),
  });
});

async function serve(target: string): Promise<ReadOutcome> {
  const outcome = await reads.serve(request(target));
  if (outcome instanceof ProxyError) throw new Error(`${outcome.status} ${outcome.code}`);
  return outcome;
}

/** Reads `target` every half an L1 lifetime for `ms`, as a page in demand is read. */
async function readFor(target: string, ms: number): Promise<ReadOutcome[]> {
  const outcomes: ReadOutcome[] = [];
  for (let spent = 0; spent < ms; spent += L1_TTL_MS / 2) {
    clock += L1_TTL_MS / 2;
    outcomes.push(await serve(target));
    await Promise.all(refreshes);
  }
  return outcomes;
}

describe('the L1 while the store cannot be asked', () => {
  it('serves a page it holds for as long as it is fresh, many L1 lifetimes, without the origin', async () => {
    const target = 'receipts?per_page=1';
    await serve(target);
    store.down = true;
    const outcomes = await readFor(target, 9 * L1_TTL_MS);
    expect(outcomes.map((o) => o.cacheStatus.split(';')[1]?.trim())).toEqual(outcomes.map(() => 'hit'));
    expect(outcomes.every((o) => o.body.equals(PAGE))).toBe(true);
    expect(calls).toEqual([undefined]);
  });

  it('past its freshness, serves it stale while one conditional refresh runs, then holds the refreshed copy', async () => {
    const target = 'receipts?per_page=2';
    await serve(target);
    store.down = true;
    clock += 12_000; // stale, within staleWhileRevalidate
    answer = () => ({ kind: 'not-modified', notModified: { etag: '"v1"', lastModified: undefined, elapsedMs: 2 } });
    const stale = await serve(target);
    expect(stale.cacheStatus).toMatch(/^slab-proxy; hit; ttl=-?\d+; detail=stale-while-revalidate$/);
    await Promise.all(refreshes);
    expect(calls).toEqual([undefined, { etag: '"v1"', lastModified: undefined }]);
    const outcomes = await readFor(target, 3 * L1_TTL_MS);
    expect(outcomes.map((o) => o.cacheStatus)).toEqual(
      outcomes.map(() => expect.stringMatching(/^slab-proxy; hit; ttl=\d+$/)),
    );
    expect(calls).toHaveLength(2);
  });

  it('fetches a page it did not hold once, not claiming it stored, and serves it from the L1 after', async () => {
    store.down = true;
    const target = 'receipts?per_page=3';
    const first = await serve(target);
    expect(first.cacheStatus).toBe('slab-proxy; fwd=miss; fwd-status=200');
    const outcomes = await readFor(target, 3 * L1_TTL_MS);
    expect(outcomes.every((o) => o.cacheStatus.startsWith('slab-proxy; hit; ttl='))).toBe(true);
    expect(calls).toEqual([undefined]);
  });

  it('serves no copy of a generation a purge made old while it was away, once the store answers', async () => {
    const target = 'receipts?per_page=4';
    await serve(target);
    store.down = true;
    await readFor(target, 2 * L1_TTL_MS);
    // Purged elsewhere while this replica could not hear of it: a new generation in the store.
    store.down = false;
    await store.purge(cacheAddress('test', request(target).read, PRINCIPAL, 'company').group);
    answer = () => answered(NEWER, { etag: '"v2"', elapsedMs: 3 });
    clock += L1_TTL_MS; // the copy's L1 lifetime over: the next read asks the store
    const after = await serve(target);
    expect(after.body.equals(NEWER)).toBe(true);
    expect(calls).toEqual([undefined, undefined]);
  });
});
