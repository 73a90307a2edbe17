/**
 * Next-page prefetch (docs/cache.md#prefetch), through the read service with the
 * in-process store and a fake origin that pages a collection by keyset: what is fetched ahead (the
 * next pages, up to the depth, as prefetches under the walker's own credential), what the walker
 * then gets (hits, counted as used), and what is not fetched or stored (a last page, a resource
 * without prefetch, an error answer, a prefetch the upstream has no room for, another company's
 * request), with the caps per replica and per company.
 */
import fc from 'fast-check';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { Principal } from '../../src/auth/principal.js';
import { LOCAL_COORDINATOR } from '../../src/cache/read/coordinator.js';
import type { Origin, OriginOutcome, ReadRequest } from '../../src/cache/read/origin.js';
import { CachePolicies } from '../../src/cache/read/policy.js';
import type { ReadOutcome } from '../../src/cache/read/read-outcome.js';
import { createReadService, type ReadService } from '../../src/cache/read/read-service.js';
import { createMemoryStore } from '../../src/cache/stores/memory-store.js';
import type { CacheStore } from '../../src/cache/stores/store.js';
import { ProxyError, UpstreamUnavailableError } from '../../src/errors/proxy-error.js';
import type { PrefetchResult } from '../../src/observability/metrics.js';
import { guardOrigin } from '../../src/upstream/guarded-fetch.js';
import { CircuitBreaker } from '../../src/upstream-guard/circuit-breaker.js';
import { createUpstreamBudget } from '../../src/upstream-guard/upstream-budget.js';
import { createUpstreamPause } from '../../src/upstream-guard/upstream-pause.js';
import { configWith } from '../helpers/env.js';
import { answered } from '../helpers/origin-answers.js';
import { testPrincipal } from '../helpers/principals.js';
import { readMetrics } from '../helpers/read-metrics.js';
import { readRequest } from '../helpers/read-request.js';

function principal(company: string): Principal {
  return testPrincipal({ company, subject: `walker-${company}` });
}

function request(target: string, company = '1'): ReadRequest {
  return readRequest(target, principal(company), `token-of-${company}`);
}

/** 10 records a company, ids 1..10, pages of `per_page` after `after_id`. */
function page(company: string, afterId: number, perPage: number): Buffer {
  const ids = Array.from({ length: 10 }, (_, i) => i + 1).filter((id) => id > afterId);
  const data = ids.slice(0, perPage).map((id) => ({ id, company }));
  const hasMore = ids.length > perPage;
  const last = data.at(-1)?.id ?? afterId;
  return Buffer.from(JSON.stringify({ data, meta: { per_page: perPage, has_more: hasMore, next_after_id: last } }));
}

interface Asked {
  readonly target: string;
  readonly company: string;
  readonly token: string;
  readonly spare: boolean;
}

let clock: number;
let asked: Asked[];
let refuse: ((request: ReadRequest) => OriginOutcome | undefined) | undefined;
let counted: PrefetchResult[];
let walks: Array<Promise<void>>;
let reads: ReadService;
let gate: Promise<void> | undefined;

const origin: Origin = async (req) => {
  asked.push({
    target: req.read.upstreamTarget,
    company: req.principal.company,
    token: req.token,
    spare: req.prefetch !== undefined,
  });
  // Judged as the request was when it was asked (a client's request may join a prefetch later).
  const refused = refuse?.(req);
  if (req.prefetch !== undefined && gate !== undefined) await gate;
  if (refused !== undefined) return refused;
  const query = new URLSearchParams(req.read.query);
  return answered(page(req.principal.company, Number(query.get('after_id') ?? 0), Number(query.get('per_page'))));
};

interface StartOptions {
  depth?: number;
  maxConcurrent?: number;
  maxPerCompany?: number;
  prefetch?: boolean;
  /** Shared by the replicas of a test (default: a store of its own). */
  store?: CacheStore;
  /** Where this replica counts its prefetches (default: `counted`). */
  count?: PrefetchResult[];
  /** The origin (default: the paging fake, unguarded). */
  fetch?: Origin;
}

function start(options: StartOptions = {}): ReadService {
  reads = createReadService({
    store: options.store ?? createMemoryStore({ maxBytes: 1_048_576, now: () => clock }),
    l1: undefined,
    coordinator: LOCAL_COORDINATOR,
    policies: new CachePolicies(
      configWith({ cache: { resources: { receipts: { ttl: 60, prefetch: options.prefetch ?? true } } } }).cache,
    ),
    keyPrefix: 'test',
    fetch: options.fetch ?? origin,
    coalesceWaitMs: 100,
    now: () => clock,
    metrics: readMetrics({ prefetch: (result) => void (options.count ?? counted).push(result) }),
    prefetch: {
      depth: options.depth ?? 2,
      maxConcurrent: options.maxConcurrent ?? 4,
      maxPerCompany: options.maxPerCompany ?? 2,
    },
    onPrefetch: (walk) => walks.push(walk),
  });
  return reads;
}

async function serve(target: string, company = '1', replica = reads): Promise<ReadOutcome> {
  const outcome = await replica.serve(request(target, company));
  if (outcome instanceof ProxyError) throw new Error(outcome.code);
  return outcome;
}

/** Every walk ahead started so far, and those they started, settled; and what the store answered counted. */
async function settled(): Promise<void> {
  for (let seen = 0; seen < walks.length; seen = walks.length) await Promise.all(walks.slice(seen));
  await new Promise((resolve) => setImmediate(resolve));
}

/** The guard's answer to a prefetch when the upstream has no slot to spare. */
const noSlotToSpare = (req: ReadRequest): OriginOutcome | undefined =>
  req.prefetch?.spare === true
    ? { kind: 'failure', error: new UpstreamUnavailableError(1), fwdStatus: 503, upstreamMs: 0, spareRefused: true }
    : undefined;

const targets = (): string[] => asked.map((a) => a.target.slice(a.target.indexOf('?') + 1));

beforeEach(() => {
  clock = 1_000_000;
  asked = [];
  refuse = undefined;
  counted = [];
  walks = [];
  gate = undefined;
});

// A walk ahead still running would push into the next test's record.
afterEach(settled);

describe('next-page prefetch', () => {
  it('fetches the next pages ahead of a walker, as prefetches under its own credential, and its next requests are hits', async () => {
    start({ depth: 2 });
    // A first page read: nothing fetched ahead (most readers of a first page stop there).
    expect((await serve('receipts?per_page=2')).cacheResult).toBe('miss');
    await settled();
    expect(targets()).toEqual(['per_page=2']);
    // Its next page asked for: a reader following the cursor. One page is fetched ahead.
    expect((await serve('receipts?after_id=2&per_page=2')).cacheResult).toBe('miss');
    await settled();
    expect(targets()).toEqual(['per_page=2', 'after_id=2&per_page=2', 'after_id=4&per_page=2']);
    // It takes that page: a walker. The proxy now walks `depth` (2) pages ahead of it.
    const third = await serve('receipts?after_id=4&per_page=2');
    expect(third.cacheResult).toBe('hit');
    expect(JSON.parse(third.body.toString()).data.map((r: { id: number }) => r.id)).toEqual([5, 6]);
    await settled();
    expect(targets().slice(3)).toEqual(['after_id=6&per_page=2', 'after_id=8&per_page=2']);
    expect(asked.map((a) => [a.company, a.token, a.spare])).toEqual([
      ['1', 'token-of-1', false],
      ['1', 'token-of-1', false],
      ['1', 'token-of-1', true],
      ['1', 'token-of-1', true],
      ['1', 'token-of-1', true],
    ]);
    expect((await serve('receipts?after_id=6&per_page=2')).cacheResult).toBe('hit');
    expect((await serve('receipts?after_id=8&per_page=2')).cacheResult).toBe('hit');
    await settled();
    expect(asked).toHaveLength(5); // the last page names no next one
    expect(counted.filter((r) => r === 'started')).toHaveLength(3);
    expect(counted.filter((r) => r === 'used')).toHaveLength(3);
  });

  it('walks ahead of a request that follows a cursor across pages held: the window moves on with the walker', async () => {
    start({ depth: 1 });
    await serve('receipts?per_page=2');
    await serve('receipts?after_id=2&per_page=2'); // follows: page 3 fetched ahead
    await settled();
    expect((await serve('receipts?after_id=4&per_page=2')).cacheResult).toBe('hit'); // a page fetched ahead: page 4 next
    await settled();
    expect((await serve('receipts?after_id=6&per_page=2')).cacheResult).toBe('hit');
    await settled();
    expect(targets()).toEqual([
      'per_page=2',
      'after_id=2&per_page=2',
      'after_id=4&per_page=2',
      'after_id=6&per_page=2',
      'after_id=8&per_page=2',
    ]);
    // Another reader's first page: nothing fetched ahead of it.
    await serve('receipts?per_page=4');
    await settled();
    expect(asked).toHaveLength(6);
  });

  it('counts a page fetched ahead once in the fleet: used by the replica whose request took it, wasted by the one that fetched it', async () => {
    const store = createMemoryStore({ maxBytes: 1_048_576, now: () => clock });
    const onA: PrefetchResult[] = [];
    const onB: PrefetchResult[] = [];
    const a = start({ depth: 1, store, count: onA });
    const b = start({ depth: 1, store, count: onB });
    await serve('receipts?per_page=3', '1', a);
    await serve('receipts?after_id=3&per_page=3', '1', a); // A fetches page 3 ahead
    await settled();
    expect((await serve('receipts?after_id=6&per_page=3', '1', b)).cacheResult).toBe('hit'); // B takes it, fetches page 4 ahead
    await settled();
    expect((await serve('receipts?after_id=6&per_page=3', '1', a)).cacheResult).toBe('hit'); // taken already: not counted again
    await serve('receipts?after_id=6&per_page=3', '1', b);
    await settled();
    expect(onA).toEqual(['started']);
    expect(onB.toSorted()).toEqual(['started', 'used']);
    // Page 4 expires untaken: B, which fetched it, counts it wasted at its next request; A nothing.
    clock += 61_000;
    await serve('receipts/1', '1', b);
    await serve('receipts/1', '1', a);
    await settled();
    expect(onB.toSorted()).toEqual(['started', 'used', 'wasted']);
    expect(onA).toEqual(['started']);
  });

  it('fetches nothing ahead for a resource without prefetch, a record, or the last page', async () => {
    start({ prefetch: false });
    await serve('receipts?per_page=3');
    await serve('receipts/4');
    await settled();
    expect(asked).toHaveLength(2);
    start();
    await serve('receipts?after_id=7&per_page=3'); // ids 8, 9, 10: the last page
    await settled();
    expect(asked).toHaveLength(3);
    expect(counted).toEqual([]);
  });

  it('stores no error in a page’s place, and ends the walk ahead at the first', async () => {
    start({ depth: 3 });
    refuse = (req) =>
      req.prefetch?.spare === true
        ? {
            kind: 'failure',
            error: new UpstreamUnavailableError(1),
            fwdStatus: 502,
            upstreamStatus: 500,
            upstreamMs: 1,
          }
        : undefined;
    await serve('receipts?per_page=3');
    await serve('receipts?after_id=3&per_page=3');
    await settled();
    expect(targets()).toEqual(['per_page=3', 'after_id=3&per_page=3', 'after_id=6&per_page=3']);
    expect(counted).toEqual(['started', 'failed']);
    refuse = undefined;
    // The walker's own request for that page: a miss it fetches itself, not an error from the store.
    const third = await serve('receipts?after_id=6&per_page=3');
    expect(third.cacheResult).toBe('miss');
    expect(third.status).toBe(200);
  });

  it('counts a prefetch the upstream has no room for, and stores nothing', async () => {
    start();
    refuse = noSlotToSpare;
    await serve('receipts?per_page=3');
    await serve('receipts?after_id=3&per_page=3');
    await settled();
    expect(counted).toEqual(['budget']); // the upstream was not asked: nothing started
    expect((await serve('receipts?after_id=6&per_page=3')).cacheResult).toBe('miss');
  });

  it('a walker that joins a prefetch the upstream had no room for fetches its page itself', async () => {
    let open = (): void => undefined;
    gate = new Promise((resolve) => {
      open = resolve;
    });
    start({ depth: 1 });
    refuse = noSlotToSpare;
    await serve('receipts?per_page=3');
    await serve('receipts?after_id=3&per_page=3');
    // The prefetch of page 3 is in flight; the walker asks for page 3 and joins it.
    const third = reads.serve(request('receipts?after_id=6&per_page=3'));
    await new Promise((resolve) => setImmediate(resolve));
    open();
    const outcome = await third;
    if (outcome instanceof ProxyError) throw new Error(`a ${String(outcome.status)} from a prefetch's refusal`);
    expect(outcome.status).toBe(200);
    expect(asked.map((a) => a.spare)).toEqual([false, false, true, false]);
  });

  it('a walker that joins a prefetch waiting for a slot to spare makes it its own request: the next slot is its, ahead of later requests', async () => {
    const budget = createUpstreamBudget({ maxConcurrent: 1, maxPerSecond: 1_000, replicas: 1, holdMs: 1_000 });
    let free = (): void => undefined;
    const busy = new Promise<void>((resolve) => {
      free = resolve;
    });
    // The paging fake behind the real guard and budget; a record read holds the one slot until `free`.
    const guarded = guardOrigin(
      async (req, validators) => {
        if (req.read.kind === 'record' && req.read.upstreamTarget.endsWith('/5')) await busy;
        return origin(req, validators);
      },
      {
        breaker: new CircuitBreaker({ failures: 5, openForMs: 60_000 }),
        pause: createUpstreamPause({ probeMs: 1_000 }),
        budget,
        maxQueueWaitMs: 5_000,
      },
    );
    const store = createMemoryStore({ maxBytes: 1_048_576, now: () => clock });
    // Pages 1 and 2 stored by a replica without prefetch; this one then hits them and walks ahead.
    const plain = start({ store, prefetch: false });
    await serve('receipts?per_page=3', '1', plain);
    await serve('receipts?after_id=3&per_page=3', '1', plain);
    const walker = start({ store, depth: 1, fetch: guarded });
    const holding = walker.serve(request('receipts/5'));
    await new Promise((resolve) => setImmediate(resolve));
    expect((await serve('receipts?per_page=3', '1', walker)).cacheResult).toBe('hit');
    expect((await serve('receipts?after_id=3&per_page=3', '1', walker)).cacheResult).toBe('hit');
    await new Promise((resolve) => setTimeout(resolve, 20)); // the prefetch of page 3 waits for a slot to spare
    const third = serve('receipts?after_id=6&per_page=3', '1', walker); // joins it
    await new Promise((resolve) => setImmediate(resolve));
    const later = walker.serve(request('receipts/7'));
    // Past the prefetch's own wait: a prefetch would have given up by now and the walker fetched after `later`.
    await new Promise((resolve) => setTimeout(resolve, 150));
    free();
    expect((await third).cacheResult).toBe('collapsed');
    await Promise.all([holding, later]);
    await settled();
    // (After them, the walk ahead from page 2.)
    expect(asked.slice(2, 5).map((a) => a.target.replace(/\?.*/, '').split('/').at(-1))).toEqual([
      '5',
      'receipts',
      '7',
    ]);
    expect(counted.filter((r) => r === 'used')).toHaveLength(1);
    budget.close();
  });

  it('keeps each company’s pages its own: another company’s same request is its own miss', async () => {
    start();
    await serve('receipts?per_page=3', '1');
    await settled();
    const other = await serve('receipts?after_id=3&per_page=3', '2');
    expect(other.cacheResult).toBe('miss');
    expect(JSON.parse(other.body.toString()).data.every((r: { company: string }) => r.company === '2')).toBe(true);
    const own = await serve('receipts?after_id=3&per_page=3', '1');
    expect(JSON.parse(own.body.toString()).data.every((r: { company: string }) => r.company === '1')).toBe(true);
  });

  it('holds the caps in flight: one company’s walks, then the replica’s', async () => {
    let open = (): void => undefined;
    gate = new Promise((resolve) => {
      open = resolve;
    });
    start({ depth: 1, maxConcurrent: 2, maxPerCompany: 1 });
    const walkTo2 = async (perPage: number, company: string): Promise<void> => {
      await serve(`receipts?per_page=${String(perPage)}`, company);
      await serve(`receipts?after_id=${String(perPage)}&per_page=${String(perPage)}`, company);
    };
    await walkTo2(2, '1'); // its prefetch waits at the upstream
    await walkTo2(3, '1'); // company 1 has one in flight: skipped
    await walkTo2(2, '2'); // the replica's second in flight
    await walkTo2(2, '3'); // two in flight: skipped
    await new Promise((resolve) => setImmediate(resolve));
    expect(asked.filter((a) => a.spare).map((a) => a.company)).toEqual(['1', '2']);
    expect(counted.filter((r) => r === 'cap')).toHaveLength(2);
    open();
    await settled();
    expect((await serve('receipts?after_id=4&per_page=2', '1')).cacheResult).toBe('hit');
    expect((await serve('receipts?after_id=4&per_page=2', '3')).cacheResult).toBe('miss');
  });

  it('never answers one company with another’s records, however walks of several companies interleave (fuzzed)', async () => {
    const step = fc.record({
      company: fc.constantFrom('1', '2', '3'),
      perPage: fc.constantFrom(2, 3),
      after: fc.constantFrom(0, 2, 3, 4, 6, 9),
      settle: fc.boolean(),
    });
    await fc.assert(
      fc.asyncProperty(fc.array(step, { minLength: 1, maxLength: 25 }), async (steps) => {
        clock = 1_000_000;
        walks = [];
        start({ depth: 3, maxConcurrent: 2, maxPerCompany: 1 });
        for (const { company, perPage, after, settle } of steps) {
          const target = `receipts?per_page=${String(perPage)}${after === 0 ? '' : `&after_id=${String(after)}`}`;
          const answer = await serve(target, company);
          const page = JSON.parse(answer.body.toString()) as { data: Array<{ id: number; company: string }> };
          expect(page.data.every((r) => r.company === company && r.id > after)).toBe(true);
          if (settle) await settled();
        }
        await settled();
      }),
      { numRuns: 60 },
    );
  });
});
