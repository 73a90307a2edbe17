/**
 * The read service: what the data plane calls once a read is authenticated, authorised and
 * canonical (docs/architecture.md#the-request-flow, §6). It serves from the cache (L1, then the store), coalesces misses into
 * one upstream request per key in the process and across replicas, serves stale while one
 * background refresh runs, and serves stale when the upstream fails or answers 429.
 *
 *   L1 hit (fresh, current generation)            → hit
 *   store hit (fresh)                             → hit, into L1
 *     either, past the page's refresh-ahead point → hit, one background refresh (refresh-ahead.ts)
 *   store stale, within staleWhileRevalidate      → hit (revalidating), one background refresh
 *   otherwise                                     → one fill per key (leader); others collapse
 *     fill: 200 / record 404                      → stored, shared with every waiter
 *           failure (refused, deadline, 5xx, bad) → shared; each serves stale within staleIfError
 *           401 / 403 / 429 / other 4xx           → the leader's alone; each waiter fetches itself
 */
import { RESOURCE_NAMES, type ResourceName } from '../catalog/resources.js';
import type { ProxyError } from '../errors/proxy-error.js';
import type { Origin, OriginAnswer, OriginFailure, ReadRequest } from './origin.js';

export type { ReadRequest };
import { type CacheAddress, cacheAddress, groupTag } from './cache-key.js';
import { type CacheResult, type CacheStatus, cacheResultOf, formatCacheStatus } from './cache-status.js';
import type { Metrics } from '../observability/metrics.js';
import type { RequestTrace, StoreLookupResult } from '../observability/tracing.js';
import type { FillCoordinator } from './coordinator.js';
import { type CacheEntry, type CodedBody, brotliBody, strongEtag } from './entry.js';
import type { L1Cache } from './l1.js';
import { type PurgeBus, createLocalPurgeBus } from './purge-bus.js';
import { refreshAheadAt, refreshWindowStart } from './refresh-ahead.js';
import { createTurnGate } from '../platform/turn-gate.js';
import type { CachePolicies, EffectivePolicy } from './policy.js';
import { type CacheStore, type StoreLookup, isCurrent } from './store.js';

/** What the client is sent, before the headers every read gets. */
export interface ReadOutcome {
  readonly status: number;
  /** The identity body: the upstream's bytes. */
  readonly body: Buffer;
  /** The same in brotli, as stored (answers made from an entry whose body compresses). */
  readonly brotli: CodedBody | undefined;
  readonly contentType: string;
  /** The upstream's `Retry-After` on a passed-through 429. */
  readonly retryAfter: string | undefined;
  /** `Cache-Status` (RFC 9211). */
  readonly cacheStatus: string;
  readonly cacheResult: CacheResult;
  /** Answers made from a cache entry (200, record 404) only: the validator. */
  readonly etag: string | undefined;
  /**
   * `Age`: whole seconds since the entry was stored, rounded up (entries only). With
   * `maxAgeSeconds` it gives a client what the proxy means, RFC 9111 §4.2.3: see `fromEntry`.
   */
  readonly ageSeconds: number | undefined;
  /** `max-age`: the entry's freshness lifetime under the policy in force, whole seconds (entries only). */
  readonly maxAgeSeconds: number | undefined;
  readonly upstreamMs: number | undefined;
}

export interface ReadService {
  serve(request: ReadRequest): Promise<ReadOutcome | ProxyError>;
  /**
   * A fresh hit held in this process (the L1, or an in-process store), synchronously; `undefined`
   * when `serve` must run. The hit path of the data plane tries this first.
   */
  serveHot(request: ReadRequest): ReadOutcome | undefined;
  /**
   * Makes every entry of the company (or of one of its resources) a miss on every replica: a new
   * generation in the store, and every replica's L1 copies dropped at once (the purge bus).
   * Resolves false when the store or the bus could not be reached.
   */
  purge(company: string, resource?: ResourceName): Promise<boolean>;
}

/** The result of one fill, as every request waiting on it sees it. */
type Fill =
  | {
      readonly kind: 'entry';
      readonly entry: CacheEntry;
      readonly stored: boolean;
      readonly upstreamMs: number | undefined;
      readonly collapsed: boolean;
    }
  | { readonly kind: 'failure'; readonly outcome: OriginFailure }
  /** 401/403/429/other 4xx: for the request whose token it was. */
  | { readonly kind: 'private'; readonly answer: OriginAnswer }
  /** A background refresh that another replica is already doing. */
  | { readonly kind: 'skipped' };

export interface ReadServiceOptions {
  readonly store: CacheStore;
  /** In front of a remote store only. */
  readonly l1: L1Cache | undefined;
  readonly coordinator: FillCoordinator;
  readonly policies: CachePolicies;
  readonly keyPrefix: string;
  readonly fetch: Origin;
  /** How long a replica waits for another replica's fill before fetching itself, ms. */
  readonly coalesceWaitMs: number;
  readonly now?: () => number;
  readonly metrics?: Pick<Metrics, 'coalesced' | 'l1Lookup' | 'storeLookup'>;
  /** Background refreshes and their failures, for tests and metrics. */
  readonly onBackgroundRefresh?: (settled: Promise<void>) => void;
  /** How purges reach the other replicas (default: this process only). */
  readonly purges?: PurgeBus;
  /**
   * The last fraction of a page's freshness in which a hit refreshes it in the background, at a
   * point of its own (refresh-ahead.ts); 0 (the default here): only once stale.
   */
  readonly refreshAhead?: number;
  /** Background refreshes running at once in this process, at most (default: no bound). */
  readonly maxBackgroundRefreshes?: number;
}

const MAX_JOIN_ATTEMPTS = 3;
/** Times a replica waits on another replica's lease before fetching regardless. */
const LEASE_ROUNDS = 2;
const SKIPPED: Fill = { kind: 'skipped' };

/** Whole seconds elapsed or left (`Age`, `Cache-Status` `ttl`): rounded down, never overstated. */
function wholeSeconds(ms: number): number {
  return Math.floor(ms / 1000);
}

/**
 * What a client is told of an entry's freshness (RFC 9111 §4.2): `max-age` is the freshness
 * lifetime and `Age` the entry's age, and a client computes what is left as their difference
 * (§4.2.3). Policies are whole seconds, so the lifetime is exact; the age is rounded *up*, so that
 * max-age − Age is the remaining freshness rounded down and never overstates it (by less than a
 * second at most it understates it). That difference is also `Cache-Status`'s `ttl` for a hit. A
 * stale entry (served while revalidating, or on an upstream failure) keeps the same two figures:
 * its Age then exceeds its max-age, so every client sees it as stale and never reuses it as fresh.
 * A clock behind another replica's (a negative age) counts as age 0.
 */
function lifetimeSeconds(entry: CacheEntry): number {
  return Math.max(0, wholeSeconds(entry.freshUntil - entry.storedAt));
}

function ageSeconds(entry: CacheEntry, at: number): number {
  return Math.max(0, Math.ceil((at - entry.storedAt) / 1000));
}

export function createReadService(options: ReadServiceOptions): ReadService {
  const { store, l1, coordinator, policies, keyPrefix, fetch, metrics } = options;
  const now = options.now ?? Date.now;
  /** One fill per key in this process, with the trace of the request leading it (tracing on). */
  const inflight = new Map<string, { readonly fill: Promise<Fill>; readonly trace: RequestTrace | undefined }>();
  const ahead = options.refreshAhead ?? 0;
  if (!(ahead >= 0 && ahead <= 1)) throw new TypeError('cache.refresh.ahead must be between 0 and 1');
  const maxBackground = options.maxBackgroundRefreshes ?? Number.POSITIVE_INFINITY;
  if (!(maxBackground >= 1)) throw new TypeError('cache.refresh.maxConcurrent must be at least 1');
  /** Background refreshes running (a refresh ahead counts from its store lookup on). */
  let backgroundRefreshes = 0;
  /** Keys whose refresh ahead is reading the store, before its fill (if any) is in flight. */
  const lookingAhead = new Set<string>();
  /**
   * Store reads in flight, per key: the requests that miss the L1 together (its copy of a hot
   * page expires for all of them at once) share one read and one decoding, instead of each making
   * its own. Only reads that may be shared go through it: a fill's reads after its lease must see
   * the store as it is then.
   */
  const reading = new Map<string, Promise<StoreLookup>>();
  function readStore(address: CacheAddress): Promise<StoreLookup> {
    let pending = reading.get(address.key);
    if (pending === undefined) {
      pending = store.lookup(address).finally(() => reading.delete(address.key));
      reading.set(address.key, pending);
    }
    return pending;
  }
  /** A background fill's CPU work (validating, hashing, compressing) waits for a turn of its own. */
  const backgroundTurn = createTurnGate();

  /**
   * Freshness under the policy in force now, not the one at storing time: a run-time TTL override
   * applies to pages already cached too (docs/operations.md#the-operator-api). Never past what was stored for it, since the
   * store keeps an entry only until its keep-until.
   */
  function withPolicy(entry: CacheEntry, policy: EffectivePolicy): CacheEntry {
    const freshUntil = entry.storedAt + (entry.status === 200 ? policy.ttl : policy.notFoundTtl) * 1000;
    return freshUntil === entry.freshUntil ? entry : { ...entry, freshUntil };
  }

  function fromEntry(entry: CacheEntry, at: number, status: CacheStatus, upstreamMs?: number): ReadOutcome {
    return {
      status: entry.status,
      body: entry.body,
      brotli: entry.brotli,
      contentType: entry.contentType,
      retryAfter: undefined,
      cacheStatus: formatCacheStatus(status),
      cacheResult: cacheResultOf(status),
      etag: entry.etag,
      ageSeconds: ageSeconds(entry, at),
      maxAgeSeconds: lifetimeSeconds(entry),
      upstreamMs,
    };
  }

  function fromAnswer(answer: OriginAnswer): ReadOutcome {
    return {
      status: answer.status,
      body: answer.body,
      brotli: undefined,
      contentType: answer.contentType ?? 'application/json',
      retryAfter: answer.status === 429 ? answer.retryAfter : undefined,
      cacheStatus: formatCacheStatus({ kind: 'miss', fwdStatus: answer.status, stored: false }),
      cacheResult: 'miss',
      etag: undefined,
      ageSeconds: undefined,
      maxAgeSeconds: undefined,
      upstreamMs: answer.elapsedMs,
    };
  }

  /** A stale copy within stale-if-error, for a failed or rate-limited fill. */
  function staleIfError(
    stale: CacheEntry | undefined,
    policy: EffectivePolicy,
    fwdStatus: number,
    upstreamMs: number | undefined,
  ): ReadOutcome | undefined {
    const at = now();
    if (stale === undefined || at >= stale.freshUntil + policy.staleIfError * 1000) return undefined;
    return fromEntry(
      stale,
      at,
      { kind: 'stale-if-error', ttl: wholeSeconds(stale.freshUntil - at), fwdStatus },
      upstreamMs,
    );
  }

  /** The entry for a cacheable answer (a well-formed 200, or the 404 of a single record). */
  function entryFor(answer: OriginAnswer, policy: EffectivePolicy, generation: string): CacheEntry {
    const ttl = answer.status === 200 ? policy.ttl : policy.notFoundTtl;
    const storedAt = now();
    const freshUntil = storedAt + ttl * 1000;
    const etag = strongEtag(answer.body);
    return {
      status: answer.status,
      contentType: answer.contentType ?? 'application/json',
      etag,
      body: answer.body,
      // Compressed once, here: the store keeps it, and `br` clients are sent it, this one included.
      brotli: brotliBody(answer.body, etag),
      storedAt,
      freshUntil,
      keepUntil: freshUntil + Math.max(policy.staleWhileRevalidate, policy.staleIfError) * 1000,
      generation,
    };
  }

  /** Asks the upstream for this key once, for every request of every replica that wants it. */
  async function fill(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    lookup: StoreLookup,
    background: boolean,
  ): Promise<Fill> {
    const tag = address.tag;
    let lease = lookup.available ? await coordinator.tryLease(address) : 'unavailable';
    // Another replica is fetching: wait for its fill. If it stored nothing (its answer was its
    // own, or it died), take the lease again, so that the replicas still make one request between
    // them; after two rounds, fetch regardless.
    for (let round = 0; lease === 'held' && round < LEASE_ROUNDS; round++) {
      if (background) return SKIPPED;
      // The other replica's trace is not known here (nothing carries it through Redis): no link.
      const waiting = request.trace?.coalescedWait('replicas', undefined);
      await coordinator.waitForFill(address, options.coalesceWaitMs);
      const filled = await store.lookup(address);
      if (isCurrent(filled) && now() < filled.entry.freshUntil) {
        waiting?.end(true);
        l1?.noteGeneration(tag, filled.generation);
        l1?.set(address.key, filled.entry);
        return { kind: 'entry', entry: filled.entry, stored: false, upstreamMs: undefined, collapsed: true };
      }
      waiting?.end(false);
      lease = filled.available ? await coordinator.tryLease(address) : 'unavailable';
    }
    try {
      if (lease === 'acquired') {
        // The lease was free, but another replica may have filled the key between this replica's
        // lookup and its lease (it stored, then released): read once more before asking the
        // upstream, so that every key costs one upstream request, however the requests interleave.
        const filled = await store.lookup(address);
        if (
          isCurrent(filled) &&
          now() < withPolicy(filled.entry, policy).freshUntil &&
          filled.entry.storedAt > (lookup.entry?.storedAt ?? 0)
        ) {
          if (background) return SKIPPED;
          l1?.noteGeneration(tag, filled.generation);
          l1?.set(address.key, filled.entry);
          return { kind: 'entry', entry: filled.entry, stored: false, upstreamMs: undefined, collapsed: true };
        }
      }
      const generation = lookup.generation ?? (await store.ensureGeneration(address));
      if (lookup.generation === undefined && generation !== undefined) l1?.noteGeneration(tag, generation);
      const outcome = await fetch(request);
      if (outcome.kind === 'failure') return { kind: 'failure', outcome };
      const { answer } = outcome;
      const cacheable = answer.status === 200 || (answer.status === 404 && request.read.kind === 'record');
      if (!cacheable) return { kind: 'private', answer };
      // A background refresh has no client waiting: its CPU work waits for a turn of its own, so
      // that a burst of refreshes never holds the hits queued behind it (src/platform/turn-gate.ts).
      if (background) await backgroundTurn();
      // Without a generation (store unavailable) the answer is still shared, just not kept.
      const entry = entryFor(answer, policy, generation ?? '');
      const storable = generation !== undefined && entry.freshUntil > entry.storedAt;
      // `stored` in Cache-Status means stored (RFC 9211 §2.7): only once the store said so.
      const stored = storable && (await store.save(address, entry));
      if (stored) l1?.set(address.key, entry);
      return { kind: 'entry', entry, stored, upstreamMs: answer.elapsedMs, collapsed: false };
    } finally {
      // Not awaited: the answer never waits for Redis bookkeeping (the release never rejects).
      if (lease === 'acquired') void coordinator.release(address);
    }
  }

  /** A fresh entry held in this process: the L1 in front of a remote store, or the store itself. */
  function hotHit(request: ReadRequest, address: CacheAddress, policy: EffectivePolicy): ReadOutcome | undefined {
    let entry: CacheEntry | undefined;
    if (l1 !== undefined) entry = l1.get(address.key, address.tag);
    else if (store.peek !== undefined) {
      const peeked = store.peek(address);
      if (isCurrent(peeked)) entry = peeked.entry;
    }
    if (entry === undefined) return undefined;
    entry = withPolicy(entry, policy);
    const at = now();
    if (at >= entry.freshUntil) return undefined;
    if (l1?.dueForReread(address.key) === true && !reading.has(address.key)) rereadIntoL1(address, policy, entry);
    if (dueForRefresh(address.key, entry, at)) refreshAhead(request, address, policy, entry);
    return fromEntry(entry, at, { kind: 'hit', ttl: wholeSeconds(entry.freshUntil - at) });
  }

  /**
   * Confirms an L1 copy against the store before the L1 lets it go (l1.ts, `dueForReread`): the
   * copy is served meanwhile, and replaced by the store's (a newer fill, or the same entry, trusted
   * for another L1 lifetime), or dropped by a new generation. A hot page then never misses the
   * L1, and no hit waits for Redis.
   */
  function rereadIntoL1(address: CacheAddress, policy: EffectivePolicy, held: CacheEntry): void {
    readStore(address).then(
      (lookup) => {
        if (lookup.available) l1?.noteGeneration(address.tag, lookup.generation);
        if (!isCurrent(lookup)) return;
        const entry = withPolicy(lookup.entry, policy);
        if (now() >= entry.freshUntil) return;
        // The same entry as the copy held: the held object is kept, and the one just decoded dies
        // young. Replacing it would turn every hot page's copy into old-generation garbage once per
        // L1 lifetime: what made V8 run a full collection every three seconds under load, each a
        // pause of 10–25 ms, the proxy's whole p99 at half load (issue 11).
        l1?.set(address.key, sameEntry(entry, held) ? held : entry);
      },
      () => undefined, // a failed read changes nothing: the copy expires as it would have
    );
  }

  /** Whether two copies are one fill's: same store time, validator, generation and freshness. */
  function sameEntry(a: CacheEntry, b: CacheEntry): boolean {
    return (
      a.storedAt === b.storedAt && a.etag === b.etag && a.generation === b.generation && a.freshUntil === b.freshUntil
    );
  }

  /** Whether a fresh entry is past its refresh-ahead point, with no refresh of it running. */
  function dueForRefresh(key: string, entry: CacheEntry, at: number): boolean {
    // The window's start first: most hits are before it, and pay no hash of the key.
    return (
      ahead > 0 &&
      at >= refreshWindowStart(entry.storedAt, entry.freshUntil, ahead) &&
      at >= refreshAheadAt(key, entry.storedAt, entry.freshUntil, ahead) &&
      !inflight.has(key) &&
      !lookingAhead.has(key)
    );
  }

  /**
   * Runs one background refresh, within the bound: none starts while `maxBackgroundRefreshes` run
   * (the page is still served, fresh or stale, and a later request tries again).
   */
  function inBackground(refresh: () => Promise<unknown>): void {
    if (backgroundRefreshes >= maxBackground) return;
    backgroundRefreshes += 1;
    const settled = refresh().then(
      () => undefined,
      () => undefined, // a failed refresh leaves the copy it meant to replace; a later request tries again
    );
    void settled.finally(() => {
      backgroundRefreshes -= 1;
    });
    options.onBackgroundRefresh?.(settled);
  }

  /**
   * Refreshes a fresh entry held in this process ahead of its expiry. The store is read first:
   * another replica may have refreshed the page already (the copy here is then replaced by its
   * newer one); else this process leads a background fill, which stands down if another replica
   * holds the fill lease.
   */
  function refreshAhead(request: ReadRequest, address: CacheAddress, policy: EffectivePolicy, held: CacheEntry): void {
    inBackground(async () => {
      lookingAhead.add(address.key);
      let lookup: StoreLookup;
      try {
        lookup = await readStore(address);
      } finally {
        lookingAhead.delete(address.key);
      }
      if (lookup.available) l1?.noteGeneration(address.tag, lookup.generation);
      if (isCurrent(lookup) && lookup.entry.storedAt > held.storedAt) {
        l1?.set(address.key, lookup.entry);
        return;
      }
      if (inflight.has(address.key)) return;
      await joinOrLead(request, address, policy, lookup, true).fill;
    });
  }

  /** Joins this key's fill in the process, or leads it. */
  function joinOrLead(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    lookup: StoreLookup,
    background = false,
  ): { fill: Promise<Fill>; leader: boolean; leaderTrace: RequestTrace | undefined } {
    const running = inflight.get(address.key);
    if (running !== undefined) return { fill: running.fill, leader: false, leaderTrace: running.trace };
    const started = fill(request, address, policy, lookup, background).finally(() => inflight.delete(address.key));
    inflight.set(address.key, { fill: started, trace: request.trace });
    return { fill: started, leader: true, leaderTrace: undefined };
  }

  function refreshInBackground(
    request: ReadRequest,
    address: CacheAddress,
    policy: EffectivePolicy,
    lookup: StoreLookup,
  ): void {
    if (inflight.has(address.key) || lookingAhead.has(address.key)) return;
    inBackground(() => joinOrLead(request, address, policy, lookup, true).fill);
  }

  const purges = options.purges ?? createLocalPurgeBus();
  // The cache subscribes to its own purges: a replica's L1 never serves a group purged anywhere.
  purges.subscribe((company, resource) => {
    for (const name of resource === undefined ? RESOURCE_NAMES : [resource])
      l1?.forgetGroup(groupTag({ company, resource: name }));
  });

  return {
    async purge(company, resource) {
      const groups = (resource === undefined ? RESOURCE_NAMES : [resource]).map((name) => ({
        company,
        resource: name,
      }));
      const generations = await Promise.all(groups.map((group) => store.purge(group)));
      // Announced after the new generation is stored: a replica that drops its L1 copy then reads
      // the new generation, never the old one again.
      const announced = await purges.announce(company, resource);
      return announced && generations.every((g) => g !== undefined);
    },

    serveHot(request) {
      const policy = policies.policyFor(request.read.resource.name);
      const address = cacheAddress(keyPrefix, request.read, request.principal, policy.partition);
      const hot = hotHit(request, address, policy);
      // Counted here, where the data plane asks first; `serve` asks again only after a miss.
      if (l1 !== undefined) metrics?.l1Lookup(hot !== undefined);
      return hot;
    },

    async serve(request) {
      const { read, principal } = request;
      const policy = policies.policyFor(read.resource.name);
      const address = cacheAddress(keyPrefix, read, principal, policy.partition);
      const tag = address.tag;

      const hot = hotHit(request, address, policy);
      if (hot !== undefined) return hot;

      // Looked up even while a fill runs: a stale copy is served at once during a background
      // refresh, and is the stale-if-error fallback of a request that joins a fill.
      const looking = request.trace?.lookup();
      const lookup = await readStore(address);
      if (lookup.available) l1?.noteGeneration(tag, lookup.generation);
      const current = isCurrent(lookup) ? withPolicy(lookup.entry, policy) : undefined;
      const at = now();
      const found: StoreLookupResult = !lookup.available
        ? 'unavailable'
        : current === undefined
          ? 'miss'
          : at < current.freshUntil
            ? 'hit'
            : 'stale';
      looking?.end(found);
      metrics?.storeLookup(found);
      if (current !== undefined) {
        if (at < current.freshUntil) {
          l1?.set(address.key, current);
          if (dueForRefresh(address.key, current, at)) refreshInBackground(request, address, policy, lookup);
          return fromEntry(current, at, { kind: 'hit', ttl: wholeSeconds(current.freshUntil - at) });
        }
        if (at < current.freshUntil + policy.staleWhileRevalidate * 1000) {
          refreshInBackground(request, address, policy, lookup);
          return fromEntry(current, at, { kind: 'revalidating', ttl: wholeSeconds(current.freshUntil - at) });
        }
      }

      /** A failure, or a 429 (docs/limits.md#the-upstream-guard), is answered with the stale copy while staleIfError allows. */
      const failed = (failure: OriginFailure): ReadOutcome | ProxyError =>
        staleIfError(current, policy, failure.fwdStatus, failure.upstreamMs) ?? failure.error;
      const passOn = (answer: OriginAnswer): ReadOutcome =>
        (answer.status === 429 ? staleIfError(current, policy, 429, answer.elapsedMs) : undefined) ??
        fromAnswer(answer);

      for (let attempt = 0; ; attempt++) {
        const { fill: pending, leader, leaderTrace } = joinOrLead(request, address, policy, lookup);
        // A follower in this process waits on the leader's fill: its span links to the leader's
        // request, whose trace holds the upstream exchange (OpenTelemetry links: a causal relation
        // between traces; the follower's own trace stays its client's).
        const waiting = leader ? undefined : request.trace?.coalescedWait('process', leaderTrace);
        let result: Fill;
        try {
          result = await pending;
        } catch (error) {
          waiting?.end(false);
          throw error;
        }
        waiting?.end(result.kind === 'entry' || result.kind === 'failure');
        if (result.kind === 'entry') {
          const collapsed = !leader || result.collapsed;
          if (collapsed) metrics?.coalesced(leader ? 'replicas' : 'process');
          const fwdStatus = result.entry.status;
          return fromEntry(
            // The policy in force now, as for every answer from an entry (another replica filled it).
            withPolicy(result.entry, policy),
            now(),
            collapsed ? { kind: 'collapsed', fwdStatus } : { kind: 'miss', fwdStatus, stored: result.stored },
            // A follower waited on the leader's upstream exchange: that time is not the proxy's own.
            result.upstreamMs,
          );
        }
        if (result.kind === 'failure') return failed(result.outcome);
        if (result.kind === 'private' && leader) return passOn(result.answer);
        // The leader's 401/403/429 was its own, or a background refresh stood down: this request
        // tries again with its own token (docs/cache.md), leading or joining the next fill.
        if (attempt + 1 < MAX_JOIN_ATTEMPTS) continue;
        const own = await fetch(request);
        return own.kind === 'failure' ? failed(own) : passOn(own.answer);
      }
    },
  };
}
