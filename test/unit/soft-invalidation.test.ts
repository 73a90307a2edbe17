/**
 * Soft invalidation (docs/cache.md#soft-invalidation) through the read service: two replicas, each
 * with its L1, over one in-process store and one purge bus, and an origin that counts what it is
 * asked. An invalidated page is stale, not gone: served at once while one conditional refresh
 * runs; what the change could not touch stays a hit; a fill in flight across an invalidation is
 * stale as soon as it is stored; no replica's L1 serves a copy set before an invalidation.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { LOCAL_COORDINATOR } from '../../src/cache/read/coordinator.js';
import type { Origin, OriginOutcome, ReadRequest, Validators } from '../../src/cache/read/origin.js';
import { CachePolicies } from '../../src/cache/read/policy.js';
import { createLocalPurgeBus } from '../../src/cache/read/purge-bus.js';
import type { ReadOutcome } from '../../src/cache/read/read-outcome.js';
import { createReadService, type ReadService } from '../../src/cache/read/read-service.js';
import { L1Cache } from '../../src/cache/stores/l1.js';
import { createMemoryStore } from '../../src/cache/stores/memory-store.js';
import type { CacheStore } from '../../src/cache/stores/store.js';
import { BadGatewayError, ProxyError } from '../../src/errors/proxy-error.js';
import { configWith } from '../helpers/env.js';
import { answered } from '../helpers/origin-answers.js';
import { testPrincipal } from '../helpers/principals.js';
import { readMetrics } from '../helpers/read-metrics.js';
import { readRequest } from '../helpers/read-request.js';

const COMPANY_1 = testPrincipal({ company: '1' });
const COMPANY_2 = testPrincipal({ company: '2' });

function request(target: string, principal = COMPANY_1): ReadRequest {
  return readRequest(target, principal);
}

const BODY = Buffer.from('{"data":[{"id":1}],"meta":{}}');

let clock: number;
let l1Clock: number;
let asked: Array<{ target: string; validators: Validators | undefined }>;
/** What the origin answers; a 304 to every conditional request by default (nothing changed). */
let answer: (validators: Validators | undefined) => Promise<OriginOutcome>;
let refreshes: Array<Promise<void>>;
let invalidations: string[];
let replicas: [ReadService, ReadService];

function replica(store: CacheStore, bus: ReturnType<typeof createLocalPurgeBus>, staleForMs = 1_000): ReadService {
  const origin: Origin = (req, validators) => {
    asked.push({ target: `${req.read.resource.name} ${req.principal.company}`, validators });
    return answer(validators);
  };
  return createReadService({
    store,
    l1: new L1Cache({ maxBytes: 1_048_576, ttlMs: 1_000, clock: { now: () => l1Clock } }),
    coordinator: LOCAL_COORDINATOR,
    policies: new CachePolicies(
      configWith({ cache: { defaults: { ttl: 60, staleWhileRevalidate: 30, staleIfError: 100, notFoundTtl: 5 } } })
        .cache,
    ),
    keyPrefix: 'test',
    fetch: origin,
    coalesceWaitMs: 100,
    now: () => clock,
    metrics: readMetrics({ invalidation: (scope) => void invalidations.push(scope) }),
    onBackgroundRefresh: (settled) => refreshes.push(settled),
    purges: bus,
    invalidatedStaleForMs: staleForMs,
  });
}

async function serve(on: ReadService, target: string, principal = COMPANY_1): Promise<ReadOutcome> {
  const outcome = await on.serve(request(target, principal));
  if (outcome instanceof ProxyError) throw new Error(`${outcome.status} ${outcome.code}`);
  return outcome;
}

async function settled(): Promise<void> {
  await Promise.all(refreshes.splice(0));
}

beforeEach(() => {
  clock = 1_800_000_000_000;
  l1Clock = 0;
  asked = [];
  refreshes = [];
  invalidations = [];
  answer = (validators) =>
    Promise.resolve(
      validators === undefined
        ? answered(BODY, { etag: '"u1"', elapsedMs: 1 })
        : { kind: 'not-modified', notModified: { etag: undefined, lastModified: undefined, elapsedMs: 1 } },
    );
  const store = createMemoryStore({ maxBytes: 1_048_576, now: () => clock });
  const bus = createLocalPurgeBus();
  replicas = [replica(store, bus), replica(store, bus)];
});

describe('an invalidated page', () => {
  it('is served stale at once while one conditional refresh runs; a 304 makes it fresh again', async () => {
    const [a] = replicas;
    await serve(a, 'transfers?per_page=5');
    clock += 1_000;
    expect(await a.invalidate('1', 'transfers', ['7'])).toBe(true);
    expect(invalidations).toEqual(['records']);
    const stale = await serve(a, 'transfers?per_page=5');
    expect(stale.cacheStatus).toBe('slab-proxy; hit; ttl=0; detail=stale-while-revalidate');
    await settled();
    expect(asked).toHaveLength(2);
    expect(asked[1]?.validators).toEqual({ etag: '"u1"', lastModified: undefined });
    const again = await serve(a, 'transfers?per_page=5');
    expect(again.cacheStatus).toBe('slab-proxy; hit; ttl=60');
    expect(asked).toHaveLength(2);
  });

  it('read past `staleFor` after the invalidation, waits for its conditional refresh instead', async () => {
    const [a] = replicas;
    await serve(a, 'transfers?per_page=6');
    await a.invalidate('1', 'transfers', ['7']);
    clock += 1_500; // within the policy's 30 s of stale-while-revalidate, past the 1 s of `staleFor`
    const waited = await serve(a, 'transfers?per_page=6');
    expect(waited.cacheStatus).toBe('slab-proxy; fwd=stale; fwd-status=304; stored');
    expect(asked).toHaveLength(2);
    expect((await serve(a, 'transfers?per_page=6')).cacheStatus).toBe('slab-proxy; hit; ttl=60');
  });

  it('is still served when its refresh fails, within stale-if-error, as any stale page', async () => {
    const [a] = replicas;
    await serve(a, 'transfers?per_page=7');
    await a.invalidate('1', 'transfers', ['7']);
    clock += 1_500; // past `staleFor`: the read waits for the refresh, which fails
    answer = () =>
      Promise.resolve({
        kind: 'failure',
        error: new BadGatewayError(),
        fwdStatus: 502,
        upstreamStatus: 503,
        upstreamMs: 1,
      });
    const served = await serve(a, 'transfers?per_page=7');
    expect(served.status).toBe(200);
    expect(served.body.equals(BODY)).toBe(true);
    expect(served.cacheStatus).toMatch(/^slab-proxy; fwd=stale; fwd-status=502/);
  });

  it('leaves what the change cannot touch a hit: other records, other resources, other companies', async () => {
    const [a] = replicas;
    const pages: Array<[string, typeof COMPANY_1]> = [
      ['transfers/8', COMPANY_1],
      ['remnants?per_page=5', COMPANY_1],
      ['transfers?per_page=5', COMPANY_2],
    ];
    for (const [target, principal] of pages) await serve(a, target, principal);
    await a.invalidate('1', 'transfers', ['7']);
    for (const [target, principal] of pages)
      expect((await serve(a, target, principal)).cacheStatus).toMatch(/^slab-proxy; hit; ttl=\d+$/);
    expect(asked).toHaveLength(3);
  });

  it('marks the record named and the lists; the whole resource marks every record', async () => {
    const [a] = replicas;
    for (const target of ['transfers/7', 'transfers/8', 'transfers?per_page=5']) await serve(a, target);
    await a.invalidate('1', 'transfers', ['7']);
    const isStale = async (target: string): Promise<boolean> =>
      /stale-while-revalidate/.test((await serve(a, target)).cacheStatus);
    expect([await isStale('transfers/7'), await isStale('transfers/8'), await isStale('transfers?per_page=5')]).toEqual(
      [true, false, true],
    );
    await settled();
    await a.invalidate('1', 'transfers');
    expect(invalidations).toEqual(['records', 'resource']);
    expect(await isStale('transfers/8')).toBe(true);
  });

  it('is stale once stored when its fill was in flight across the invalidation', async () => {
    const [a] = replicas;
    let release: () => void = () => undefined;
    const upstreamAsked = new Promise<void>((askedNow) => {
      answer = () =>
        new Promise((resolve) => {
          release = () => resolve(answered(BODY, { etag: '"u1"', elapsedMs: 1 }));
          askedNow();
        });
    });
    const first = serve(a, 'transfers?per_page=9');
    await upstreamAsked;
    await a.invalidate('1', 'transfers', ['1']); // the change lands while the upstream is answering
    release();
    expect((await first).cacheStatus).toContain('fwd=miss');
    answer = () =>
      Promise.resolve({
        kind: 'not-modified',
        notModified: { etag: undefined, lastModified: undefined, elapsedMs: 1 },
      });
    expect((await serve(a, 'transfers?per_page=9')).cacheStatus).toContain('detail=stale-while-revalidate');
  });

  it('is not served from another replica’s L1 copy set before the invalidation', async () => {
    const [a, b] = replicas;
    await serve(a, 'transfers?per_page=5');
    expect((await serve(b, 'transfers?per_page=5')).cacheStatus).toBe('slab-proxy; hit; ttl=60');
    // b now holds an L1 copy: its hot path serves it without the store.
    expect(b.serveHot(request('transfers?per_page=5'))?.cacheStatus).toBe('slab-proxy; hit; ttl=60');
    await a.invalidate('1', 'transfers', ['3']);
    expect(b.serveHot(request('transfers?per_page=5'))).toBeUndefined();
    expect((await serve(b, 'transfers?per_page=5')).cacheStatus).toContain('detail=stale-while-revalidate');
    await settled();
    // Refreshed under the new mark: fresh again on both replicas.
    expect((await serve(a, 'transfers?per_page=5')).cacheStatus).toBe('slab-proxy; hit; ttl=60');
    expect((await serve(b, 'transfers?per_page=5')).cacheStatus).toBe('slab-proxy; hit; ttl=60');
    expect(asked).toHaveLength(2);
  });
});
