/**
 * Automatic lifetimes (docs/cache.md#automatic-lifetimes): the rule that gives a page its next
 * lifetime from what its fill found (src/cache/read/auto-lifetime.ts), the ceiling on early refreshes
 * (src/cache/read/auto-refresh-budget.ts), and both through the read service with the in-process store
 * and an origin whose page changes or not: a page that keeps changing settles near its change
 * interval, one that never changes reaches `max`, and without a token from the ceiling a page
 * lives `max`.
 */
import { describe, expect, it } from 'vitest';
import { cacheAddress } from '../../src/cache/entry/cache-key.js';
import type { CacheEntry } from '../../src/cache/entry/entry.js';
import { nextLifetime } from '../../src/cache/read/auto-lifetime.js';
import { AutoRefreshBudget } from '../../src/cache/read/auto-refresh-budget.js';
import { LOCAL_COORDINATOR } from '../../src/cache/read/coordinator.js';
import type { Origin, OriginOutcome, ReadRequest } from '../../src/cache/read/origin.js';
import { CachePolicies } from '../../src/cache/read/policy.js';
import { createReadService, type ReadService } from '../../src/cache/read/read-service.js';
import { createMemoryStore } from '../../src/cache/stores/memory-store.js';
import type { CacheStore } from '../../src/cache/stores/store.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { storedEntry } from '../helpers/entries.js';
import { configWith } from '../helpers/env.js';
import { answered } from '../helpers/origin-answers.js';
import { testPrincipal } from '../helpers/principals.js';
import { readMetrics } from '../helpers/read-metrics.js';
import { readRequest } from '../helpers/read-request.js';

const BOUNDS = { min: 1, max: 300 };
const AT = 1_800_000_000_000;

function held(storedAt: number, autoLifetimeMs?: number): CacheEntry {
  return storedEntry(storedAt, {
    freshUntil: storedAt + (autoLifetimeMs ?? 10_000),
    ...(autoLifetimeMs !== undefined && { autoLifetimeMs }),
  });
}

describe('the next lifetime of a page', () => {
  it('starts from a tenth of the time since Last-Modified (RFC 9111 §4.2.2), never past the ttl, else from the ttl', () => {
    expect(nextLifetime({ kind: 'first' }, new Date(AT - 50_000).toUTCString(), AT, 10_000, BOUNDS)).toBe(5_000);
    expect(nextLifetime({ kind: 'first' }, new Date(AT - 600_000).toUTCString(), AT, 10_000, BOUNDS)).toBe(10_000);
    expect(nextLifetime({ kind: 'first' }, undefined, AT, 10_000, BOUNDS)).toBe(10_000);
    expect(nextLifetime({ kind: 'first' }, 'not a date', AT, 10_000, BOUNDS)).toBe(10_000);
  });

  it('without Last-Modified: doubles when the page was unchanged, halves the shorter of lifetime and holding when it changed', () => {
    const previous = held(AT - 8_000, 8_000);
    expect(nextLifetime({ kind: 'unchanged', previous }, undefined, AT, 10_000, BOUNDS)).toBe(16_000);
    expect(nextLifetime({ kind: 'changed', previous }, undefined, AT, 10_000, BOUNDS)).toBe(4_000);
    // Held 3 s of an 8 s lifetime (a stale read refreshed it early): it changed within 3 s.
    expect(nextLifetime({ kind: 'changed', previous: held(AT - 3_000, 8_000) }, undefined, AT, 10_000, BOUNDS)).toBe(
      1_500,
    );
  });

  it('with Last-Modified: a quarter of the geometric mean of the ttl and the time between its last two changes, or since its last', () => {
    const previous = { ...held(AT - 30_000, 30_000), lastModified: new Date(AT - 62_000).toUTCString() };
    // Changes 60 s apart under a ttl of 10 s: √(60 · 10) / 4 s.
    expect(nextLifetime({ kind: 'changed', previous }, new Date(AT - 2_000).toUTCString(), AT, 10_000, BOUNDS)).toBe(
      Math.round(Math.sqrt(60_000 * 10_000) / 4),
    );
    // A page changing every 16 ttls lives the ttl; more often, less; less often, more.
    const every = (ms: number) => ({ ...held(AT - 1_000, 1_000), lastModified: new Date(AT - ms).toUTCString() });
    const at = (ms: number) =>
      nextLifetime({ kind: 'changed', previous: every(ms) }, new Date(AT).toUTCString(), AT, 10_000, BOUNDS);
    expect(at(160_000)).toBe(10_000);
    expect(at(40_000)).toBe(5_000);
    expect(at(640_000)).toBe(20_000);
    // Unchanged for 200 s or 100 s: the lifetime it had (30 s) is longer than √(200 · 10) / 4 s.
    expect(
      nextLifetime({ kind: 'unchanged', previous }, new Date(AT - 200_000).toUTCString(), AT, 10_000, BOUNDS),
    ).toBe(30_000);
    expect(
      nextLifetime({ kind: 'unchanged', previous }, new Date(AT - 100_000).toUTCString(), AT, 10_000, BOUNDS),
    ).toBe(30_000);
    // A 2 s lifetime, unchanged for 100 s: √(100 · 10) / 4 s.
    expect(
      nextLifetime(
        { kind: 'unchanged', previous: held(AT - 1_000, 2_000) },
        new Date(AT - 100_000).toUTCString(),
        AT,
        10_000,
        BOUNDS,
      ),
    ).toBe(Math.round(Math.sqrt(100_000 * 10_000) / 4));
  });

  it('stays within min and max', () => {
    expect(nextLifetime({ kind: 'changed', previous: held(AT - 1_000, 1_000) }, undefined, AT, 10_000, BOUNDS)).toBe(
      1_000,
    );
    expect(nextLifetime({ kind: 'unchanged', previous: held(AT - 1, 250_000) }, undefined, AT, 10_000, BOUNDS)).toBe(
      300_000,
    );
  });
});

describe('the ceiling on early refreshes', () => {
  it('grants a second’s worth, then its rate; a fleet’s ceiling is shared by the replicas counted', () => {
    let now = 0;
    let replicas = 4;
    const budget = new AutoRefreshBudget({ perReplica: 10, perFleet: 20, replicas: () => replicas, now: () => now });
    expect(budget.rate()).toBe(5);
    const granted = Array.from({ length: 8 }, () => budget.take()).filter(Boolean).length;
    expect(granted).toBe(5);
    now += 400; // two more at 5 a second
    expect([budget.take(), budget.take(), budget.take()]).toEqual([true, true, false]);
    replicas = 1;
    expect(budget.rate()).toBe(10);
    expect(budget.counts()).toEqual({ granted: 7, refused: 4 });
  });
});

const PRINCIPAL = testPrincipal();
const TARGET = 'transfers?per_page=4';

function request(): ReadRequest {
  return readRequest(TARGET, PRINCIPAL);
}

interface Rig {
  readonly reads: ReadService;
  readonly store: CacheStore;
  clock: number;
  /** Whether the origin's page changed since the last answer. */
  changes: boolean;
  version: number;
}

function rig(tokens = Number.POSITIVE_INFINITY): Rig {
  const state = { clock: AT, changes: true, version: 0 } as Rig & { clock: number };
  const store = createMemoryStore({ maxBytes: 1_048_576, now: () => state.clock });
  const origin: Origin = (_request, validators): Promise<OriginOutcome> => {
    if (validators !== undefined && !state.changes)
      return Promise.resolve({
        kind: 'not-modified',
        notModified: { etag: undefined, lastModified: undefined, elapsedMs: 1 },
      });
    state.version += 1;
    return Promise.resolve(
      answered(Buffer.from(`{"data":[],"meta":{"v":${String(state.version)}}}`), {
        etag: `"v${String(state.version)}"`,
        elapsedMs: 1,
      }),
    );
  };
  let left = tokens;
  const reads = createReadService({
    store,
    l1: undefined,
    coordinator: LOCAL_COORDINATOR,
    policies: new CachePolicies(
      configWith({
        cache: {
          defaults: { ttl: 8, staleWhileRevalidate: 30, staleIfError: 100, notFoundTtl: 5 },
          resources: { transfers: { autoTtl: { min: 1, max: 300 } } },
        },
      }).cache,
    ),
    keyPrefix: 'test',
    fetch: origin,
    coalesceWaitMs: 100,
    now: () => state.clock,
    metrics: readMetrics(),
    autoBudget: { take: () => left-- > 0 },
  });
  return Object.assign(state, { reads, store });
}

/** Serves the page once its lifetime ran out, waiting for the refresh; returns the new lifetime, ms. */
async function refreshed(r: Rig): Promise<number | undefined> {
  const address = cacheAddress('test', request().read, PRINCIPAL, 'company');
  const before = r.store.peek?.(address).entry;
  r.clock = (before?.freshUntil ?? r.clock) + 31_000; // past its stale window: the read waits
  const outcome = await r.reads.serve(request());
  if (outcome instanceof ProxyError) throw new Error(outcome.code);
  return r.store.peek?.(address).entry?.autoLifetimeMs;
}

describe('automatic lifetimes through the read service', () => {
  it('settle at min for a page that changes at every refresh, and reach max for one that never does', async () => {
    const volatile = rig();
    const lifetimes: Array<number | undefined> = [await refreshed(volatile)];
    for (let i = 0; i < 5; i++) lifetimes.push(await refreshed(volatile));
    expect(lifetimes).toEqual([8_000, 4_000, 2_000, 1_000, 1_000, 1_000]);

    const steady = rig();
    await refreshed(steady);
    steady.changes = false;
    const growing: Array<number | undefined> = [];
    for (let i = 0; i < 7; i++) growing.push(await refreshed(steady));
    expect(growing).toEqual([16_000, 32_000, 64_000, 128_000, 256_000, 300_000, 300_000]);
  });

  it('give a page the fixed ttl when the ceiling has no token left for a shorter lifetime', async () => {
    const r = rig(1);
    // The first lifetime is the ttl (no token needed), the next shorter one takes the only token.
    expect([await refreshed(r), await refreshed(r), await refreshed(r)]).toEqual([8_000, 4_000, 8_000]);
  });

  it('serve a page no staler than its own lifetime: past it, a read waits for the refresh', async () => {
    const r = rig();
    for (let i = 0; i < 4; i++) await refreshed(r); // lifetime 1 s now
    const address = cacheAddress('test', request().read, PRINCIPAL, 'company');
    const entry = r.store.peek?.(address).entry;
    r.clock = (entry?.freshUntil ?? 0) + 500; // within its own second of staleness: served, refreshed behind
    const within = await r.reads.serve(request());
    if (within instanceof ProxyError) throw new Error(within.code);
    expect(within.cacheStatus).toContain('detail=stale-while-revalidate');
    r.clock += 5_000; // now past: the read waits
    const past = await r.reads.serve(request());
    if (past instanceof ProxyError) throw new Error(past.code);
    expect(past.cacheStatus).toMatch(/^slab-proxy; fwd=/);
  });
});
