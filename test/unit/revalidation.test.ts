/**
 * Revalidation with the upstream (docs/cache.md#revalidation), through the read service with a fake
 * origin and the in-process store behind a spy: what a refresh sends (the upstream's validators,
 * only for an entry of the current generation that has them), what a 304 does (the stored entry
 * freshened, RFC 9111 §4.3.4: new times and validators, the same body and client ETag, nothing
 * saved again), what a byte-identical 200 does (the same), and what a freshen that finds the entry
 * changed or gone does. The origin over HTTP is tested with a fake upstream client at the end.
 */

import { beforeEach, describe, expect, it } from 'vitest';
import { type CacheAddress, cacheAddress } from '../../src/cache/entry/cache-key.js';
import type { CacheEntry } from '../../src/cache/entry/entry.js';
import { LOCAL_COORDINATOR } from '../../src/cache/read/coordinator.js';
import type { Origin, OriginOutcome, ReadRequest, Validators } from '../../src/cache/read/origin.js';
import { CachePolicies } from '../../src/cache/read/policy.js';
import type { ReadOutcome } from '../../src/cache/read/read-outcome.js';
import { createReadService, type ReadService } from '../../src/cache/read/read-service.js';
import { createMemoryStore } from '../../src/cache/stores/memory-store.js';
import type { CacheStore, FreshenResult } from '../../src/cache/stores/store.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import type { RevalidationResult } from '../../src/observability/metrics.js';
import type { UpstreamAnswer, UpstreamClient, UpstreamRequest } from '../../src/upstream/client.js';
import { createUpstreamOrigin } from '../../src/upstream/fetch-read.js';
import { configWith } from '../helpers/env.js';
import { forwardingStore } from '../helpers/forwarding-store.js';
import { answered } from '../helpers/origin-answers.js';
import { testPrincipal } from '../helpers/principals.js';
import { readMetrics } from '../helpers/read-metrics.js';
import { readRequest } from '../helpers/read-request.js';

const PRINCIPAL = testPrincipal();

function request(target: string): ReadRequest {
  return readRequest(target, PRINCIPAL);
}

const PAGE = Buffer.from(JSON.stringify({ data: [{ id: 1 }, { id: 2 }], meta: { per_page: 2, has_more: false } }));
const CHANGED = Buffer.from(JSON.stringify({ data: [{ id: 1 }, { id: 3 }], meta: { per_page: 2, has_more: false } }));
const IMS = 'Tue, 03 Nov 2026 10:00:00 GMT';

function ok(body: Buffer, validators: Validators = {}): OriginOutcome {
  return answered(body, { etag: validators.etag, lastModified: validators.lastModified, elapsedMs: 3 });
}

function notModified(validators: Validators = {}): OriginOutcome {
  return {
    kind: 'not-modified',
    notModified: { etag: validators.etag, lastModified: validators.lastModified, elapsedMs: 2 },
  };
}

/** The store's writes, counted, with a hook to act before a freshen (another replica's write). */
interface SpyStore extends CacheStore {
  saves: number;
  freshens: FreshenResult[];
  beforeFreshen: (() => Promise<void>) | undefined;
}

function spyStore(inner: CacheStore): SpyStore {
  const spy: SpyStore = {
    ...forwardingStore(inner),
    kind: inner.kind,
    saves: 0,
    freshens: [],
    beforeFreshen: undefined,
    save(address, entry) {
      spy.saves += 1;
      return inner.save(address, entry);
    },
    async freshen(address, stored, fresher) {
      await spy.beforeFreshen?.();
      const result = await inner.freshen(address, stored, fresher);
      spy.freshens.push(result);
      return result;
    },
  };
  return spy;
}

let clock: number;
let store: SpyStore;
let calls: Array<Validators | undefined>;
let answer: (validators: Validators | undefined) => OriginOutcome;
let revalidations: RevalidationResult[];
let refreshes: Array<Promise<void>>;
let reads: ReadService;

function start(): void {
  store = spyStore(createMemoryStore({ maxBytes: 1_048_576, now: () => clock }));
  const origin: Origin = (_request, validators) => {
    calls.push(validators);
    return Promise.resolve(answer(validators));
  };
  reads = createReadService({
    store,
    l1: undefined,
    coordinator: LOCAL_COORDINATOR,
    // 10 s fresh, then 20 s stale-while-revalidate, kept 100 s past freshness for stale-if-error.
    policies: new CachePolicies(
      configWith({ cache: { defaults: { ttl: 10, staleWhileRevalidate: 20, staleIfError: 100, notFoundTtl: 5 } } })
        .cache,
    ),
    keyPrefix: 'test',
    fetch: origin,
    coalesceWaitMs: 100,
    now: () => clock,
    metrics: readMetrics({ revalidation: (result) => void revalidations.push(result) }),
    onBackgroundRefresh: (settled) => refreshes.push(settled),
  });
}

async function serve(target: string): Promise<ReadOutcome> {
  const outcome = await reads.serve(request(target));
  if (outcome instanceof ProxyError) throw new Error(`${outcome.status} ${outcome.code}`);
  return outcome;
}

/** The address the read service keys a target under (the company partition). */
function addressOf(target: string): CacheAddress {
  return cacheAddress('test', request(target).read, PRINCIPAL, 'company');
}

beforeEach(() => {
  clock = 1_800_000_000_000;
  calls = [];
  revalidations = [];
  refreshes = [];
  answer = () => ok(PAGE, { etag: '"v1"', lastModified: IMS });
  start();
});

describe('a refresh of a stored page', () => {
  it('sends the upstream’s validators; a 304 freshens the entry without saving it again', async () => {
    const target = 'receipts?per_page=2';
    const first = await serve(target);
    expect(first.cacheStatus).toBe('slab-proxy; fwd=miss; fwd-status=200; stored');
    expect(calls).toEqual([undefined]);
    expect(store.saves).toBe(1);
    const before = store.peek?.(addressOf(target)).entry;
    expect(before).toMatchObject({ upstreamEtag: '"v1"', lastModified: IMS });

    clock += 31_000; // past freshness and stale-while-revalidate: a request waits for the refresh
    answer = () => notModified();
    const refreshed = await serve(target);
    expect(calls[1]).toEqual({ etag: '"v1"', lastModified: IMS });
    expect(refreshed.cacheStatus).toBe('slab-proxy; fwd=stale; fwd-status=304; stored');
    expect(refreshed.status).toBe(200);
    expect(refreshed.body.equals(PAGE)).toBe(true);
    expect(refreshed.etag).toBe(first.etag);
    expect(refreshed.maxAgeSeconds).toBe(10);
    expect(refreshed.ageSeconds).toBe(0);
    expect(store.saves).toBe(1);
    expect(store.freshens).toEqual(['freshened']);
    expect(revalidations).toEqual(['not_modified']);

    const after = store.peek?.(addressOf(target)).entry;
    // The same body Buffer, the times moved, the upstream's validators kept (the 304 had none).
    expect(after?.body).toBe(before?.body);
    expect(after).toMatchObject({
      storedAt: clock,
      freshUntil: clock + 10_000,
      upstreamEtag: '"v1"',
      lastModified: IMS,
    });
    clock += 5_000;
    const hit = await serve(target);
    expect(hit.cacheStatus).toBe('slab-proxy; hit; ttl=5');
    expect(hit.etag).toBe(first.etag);
    expect(calls).toHaveLength(2);
  });

  it('requests joined to a revalidation share it: one conditional request, the others collapsed on its 304', async () => {
    const target = 'receipts?per_page=12';
    await serve(target);
    clock += 31_000;
    answer = () => notModified();
    const answers = await Promise.all([serve(target), serve(target), serve(target)]);
    expect(calls).toHaveLength(2);
    expect(answers.map((a) => a.cacheStatus).sort()).toEqual([
      'slab-proxy; fwd=stale; fwd-status=304; collapsed',
      'slab-proxy; fwd=stale; fwd-status=304; collapsed',
      'slab-proxy; fwd=stale; fwd-status=304; stored',
    ]);
    expect(new Set(answers.map((a) => a.etag)).size).toBe(1);
    expect(revalidations).toEqual(['not_modified']);
  });

  it('takes the validators a 304 carries in place of the stored ones (RFC 9111 §4.3.4)', async () => {
    const target = 'receipts?per_page=3';
    await serve(target);
    clock += 31_000;
    answer = () => notModified({ etag: '"v2"' });
    await serve(target);
    expect(store.peek?.(addressOf(target)).entry).toMatchObject({ upstreamEtag: '"v2"', lastModified: IMS });
    clock += 31_000;
    answer = () => notModified();
    await serve(target);
    expect(calls[2]).toEqual({ etag: '"v2"', lastModified: IMS });
  });

  it('refreshes in the background within stale-while-revalidate, conditionally, and the 304 freshens', async () => {
    const target = 'receipts?per_page=4';
    await serve(target);
    clock += 12_000;
    answer = () => notModified();
    const stale = await serve(target);
    expect(stale.cacheStatus).toBe('slab-proxy; hit; ttl=-2; detail=stale-while-revalidate');
    await Promise.all(refreshes);
    expect(calls[1]).toEqual({ etag: '"v1"', lastModified: IMS });
    expect(revalidations).toEqual(['not_modified']);
    expect(store.saves).toBe(1);
    expect((await serve(target)).cacheStatus).toBe('slab-proxy; hit; ttl=10');
  });

  it('an upstream without validators: an unconditional refresh, and a byte-identical 200 only freshens', async () => {
    const target = 'receipts?per_page=5';
    answer = () => ok(PAGE);
    const first = await serve(target);
    expect(store.peek?.(addressOf(target)).entry).toMatchObject({ upstreamEtag: undefined, lastModified: undefined });
    clock += 31_000;
    const again = await serve(target);
    expect(calls).toEqual([undefined, undefined]);
    expect(again.cacheStatus).toBe('slab-proxy; fwd=stale; fwd-status=200; stored');
    expect(again.etag).toBe(first.etag);
    expect(store.saves).toBe(1);
    expect(store.freshens).toEqual(['freshened']);
    expect(revalidations).toEqual(['identical']);
    expect((await serve(target)).cacheStatus).toBe('slab-proxy; hit; ttl=10');
  });

  it('a 200 with another body is stored whole, with its own validators', async () => {
    const target = 'receipts?per_page=6';
    const first = await serve(target);
    clock += 31_000;
    answer = () => ok(CHANGED, { etag: '"v2"' });
    const changed = await serve(target);
    expect(changed.cacheStatus).toBe('slab-proxy; fwd=stale; fwd-status=200; stored');
    expect(changed.body.equals(CHANGED)).toBe(true);
    expect(changed.etag).not.toBe(first.etag);
    expect(store.saves).toBe(2);
    expect(store.freshens).toEqual([]);
    expect(revalidations).toEqual(['modified']);
    expect(store.peek?.(addressOf(target)).entry).toMatchObject({ upstreamEtag: '"v2"', lastModified: undefined });
  });

  it('a purged entry is no base: the next fill is unconditional, a plain miss', async () => {
    const target = 'receipts?per_page=7';
    await serve(target);
    expect(await reads.purge('1', 'receipts')).toBe(true);
    const next = await serve(target);
    expect(calls).toEqual([undefined, undefined]);
    expect(next.cacheStatus).toBe('slab-proxy; fwd=miss; fwd-status=200; stored');
    expect(revalidations).toEqual([]);
  });

  it('a record 404 is refreshed unconditionally (preconditions apply to a 2xx only), and may be identical', async () => {
    const target = 'receipts/99';
    answer = () => answered(Buffer.from('{"error":"not_found"}'), { status: 404, etag: '"nf"' });
    await serve(target);
    clock += 31_000;
    const again = await serve(target);
    expect(calls).toEqual([undefined, undefined]);
    expect(again.status).toBe(404);
    expect(again.cacheStatus).toBe('slab-proxy; fwd=stale; fwd-status=404; stored');
    expect(revalidations).toEqual(['identical']);
  });

  it('a freshen that finds another write first stores nothing, and still serves what the 304 confirmed', async () => {
    const target = 'receipts?per_page=8';
    await serve(target);
    clock += 31_000;
    answer = () => notModified();
    const address = addressOf(target);
    const generation = store.peek?.(address).generation ?? '';
    const other: CacheEntry = {
      status: 200,
      contentType: 'application/json',
      etag: '"another-fill"',
      body: CHANGED,
      storedAt: clock - 1,
      freshUntil: clock + 9_999,
      keepUntil: clock + 120_000,
      generation,
    };
    store.beforeFreshen = async () => {
      store.beforeFreshen = undefined;
      await store.save(address, other); // another replica's fill, meanwhile
    };
    const served = await serve(target);
    expect(served.cacheStatus).toBe('slab-proxy; fwd=stale; fwd-status=304');
    expect(served.body.equals(PAGE)).toBe(true);
    expect(store.freshens).toEqual(['changed']);
    expect(store.peek?.(address).entry).toBe(other);
  });

  it('a freshen that finds the entry gone saves the confirmed entry whole (its body is at hand)', async () => {
    const target = 'receipts?per_page=9';
    await serve(target);
    clock += 31_000;
    answer = () => notModified();
    store.beforeFreshen = async () => {
      store.beforeFreshen = undefined;
      clock += 100_000; // past keepUntil: the entry expires before the freshen reaches it
    };
    const served = await serve(target);
    expect(store.freshens).toEqual(['missing']);
    expect(store.saves).toBe(2);
    expect(served.cacheStatus).toBe('slab-proxy; fwd=stale; fwd-status=304; stored');
    expect(store.peek?.(addressOf(target)).entry?.body.equals(PAGE)).toBe(true);
  });

  it('a 304 to a fill sent without validators is a bad answer: nothing stored, a 502', async () => {
    const target = 'receipts?per_page=10';
    answer = () => notModified();
    const outcome = await reads.serve(request(target));
    expect(outcome).toBeInstanceOf(ProxyError);
    expect((outcome as ProxyError).status).toBe(502);
    expect(store.saves).toBe(0);
    expect(store.peek?.(addressOf(target)).entry).toBeUndefined();
  });

  it('with caching turned off since (ttl 0), a 304 serves the kept body and keeps nothing', async () => {
    const target = 'receipts?per_page=11';
    await serve(target);
    clock += 31_000;
    answer = () => notModified();
    reads = createReadService({
      store,
      l1: undefined,
      coordinator: LOCAL_COORDINATOR,
      policies: new CachePolicies(
        configWith({ cache: { defaults: { ttl: 10, staleWhileRevalidate: 20, staleIfError: 100, notFoundTtl: 5 } } })
          .cache,
        { receipts: { ttl: 0 } },
      ),
      keyPrefix: 'test',
      fetch: (_request, validators) => {
        calls.push(validators);
        return Promise.resolve(answer(validators));
      },
      coalesceWaitMs: 100,
      now: () => clock,
    });
    const served = await serve(target);
    expect(calls[1]).toEqual({ etag: '"v1"', lastModified: IMS });
    expect(served.cacheStatus).toBe('slab-proxy; fwd=stale; fwd-status=304');
    expect(served.maxAgeSeconds).toBe(0);
    expect(store.freshens).toEqual([]);
  });
});

describe('the upstream origin’s conditional requests', () => {
  function fakeUpstream(reply: (request: UpstreamRequest) => Partial<UpstreamAnswer>): {
    client: UpstreamClient;
    sent: UpstreamRequest[];
  } {
    const sent: UpstreamRequest[] = [];
    return {
      sent,
      client: {
        server: { address: '127.0.0.1', port: 1 },
        get(upstreamRequest) {
          sent.push(upstreamRequest);
          return Promise.resolve({
            status: 200,
            contentType: 'application/json',
            retryAfter: undefined,
            etag: undefined,
            lastModified: undefined,
            body: PAGE,
            elapsedMs: 1,
            ...reply(upstreamRequest),
          });
        },
        close: () => Promise.resolve(),
      },
    };
  }

  it('sends If-None-Match and If-Modified-Since only for validators it is given, and only well-formed ones', async () => {
    const { client, sent } = fakeUpstream(() => ({}));
    const origin = createUpstreamOrigin(client);
    await origin(request('receipts'));
    await origin(request('receipts'), { etag: 'W/"x"', lastModified: IMS });
    await origin(request('receipts'), { etag: '"bad\r\nx-injected: 1"', lastModified: 'yesterday' });
    expect(sent.map((r) => [r.ifNoneMatch, r.ifModifiedSince])).toEqual([
      [undefined, undefined],
      ['W/"x"', IMS],
      [undefined, undefined],
    ]);
  });

  it('a 304 to a conditional request is its own outcome, with the validators it carries', async () => {
    const { client } = fakeUpstream(() => ({ status: 304, body: Buffer.alloc(0), etag: '"y"' }));
    const outcome = await createUpstreamOrigin(client)(request('receipts'), { etag: '"x"' });
    expect(outcome).toEqual({
      kind: 'not-modified',
      notModified: { etag: '"y"', lastModified: undefined, elapsedMs: 1 },
    });
  });

  it('a 304 to an unconditional request is a bad gateway', async () => {
    const { client } = fakeUpstream(() => ({ status: 304, body: Buffer.alloc(0) }));
    const outcome = await createUpstreamOrigin(client)(request('receipts'));
    expect(outcome).toMatchObject({ kind: 'failure', fwdStatus: 502, upstreamStatus: 304 });
  });

  it('keeps a 200’s validators only when well formed and single', async () => {
    const cases: Array<[Partial<UpstreamAnswer>, Validators]> = [
      [
        { etag: '"a"', lastModified: IMS },
        { etag: '"a"', lastModified: IMS },
      ],
      [{ etag: 'W/"weak"' }, { etag: 'W/"weak"', lastModified: undefined }],
      [
        { etag: 'unquoted', lastModified: 'not a date' },
        { etag: undefined, lastModified: undefined },
      ],
      [{ etag: ['"a"', '"b"'] }, { etag: undefined, lastModified: undefined }],
      [{ etag: `"${'x'.repeat(300)}"` }, { etag: undefined, lastModified: undefined }],
    ];
    for (const [headers, expected] of cases) {
      const { client } = fakeUpstream(() => headers);
      const outcome = await createUpstreamOrigin(client)(request('receipts'));
      if (outcome.kind !== 'answer') throw new Error(outcome.kind);
      expect({ etag: outcome.answer.etag, lastModified: outcome.answer.lastModified }).toEqual(expected);
    }
  });
});
