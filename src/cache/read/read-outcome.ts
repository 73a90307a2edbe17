/**
 * What a read gives the data plane (`ReadOutcome`), made from a cache entry or from an origin's
 * answer passed on; and how every answer from an entry tells its freshness (its times:
 * page-lifetime.ts). Pure.
 */
import type { CacheResult, CacheStatus } from '../entry/cache-status.js';
import { cacheResultOf, formatCacheStatus } from '../entry/cache-status.js';
import type { CacheEntry, CodedBody } from '../entry/entry.js';
import { asOfMarks } from '../entry/marks.js';
import { isCurrent, type StoreLookup } from '../stores/store.js';
import type { OriginAnswer } from './origin.js';
import { freshUntilUnder, servedLifetimeMs, staleIfErrorUntil } from './page-lifetime.js';
import type { EffectivePolicy } from './policy.js';

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

/** Whole seconds elapsed or left (`Age`, `Cache-Status` `ttl`): rounded down, never overstated. */
export function wholeSeconds(ms: number): number {
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
  return Math.max(0, wholeSeconds(servedLifetimeMs(entry)));
}

function ageSeconds(entry: CacheEntry, at: number): number {
  return Math.max(0, Math.ceil((at - entry.storedAt) / 1000));
}

/**
 * Freshness under the policy in force now, not the one at storing time: a run-time TTL override
 * applies to pages already cached too (docs/operations.md#the-operator-api). Never past what was
 * stored for it, since the store keeps an entry only until its keep-until.
 */
export function withPolicy(entry: CacheEntry, policy: EffectivePolicy): CacheEntry {
  const freshUntil = freshUntilUnder(entry, policy);
  return freshUntil === entry.freshUntil ? entry : { ...entry, freshUntil };
}

/**
 * The lookup's entry as it serves now: of the current generation, under the policy in force
 * (`withPolicy`) and as of the page's invalidation marks (marks.ts); `undefined` for none.
 */
export function servedEntry(lookup: StoreLookup, policy: EffectivePolicy): CacheEntry | undefined {
  return isCurrent(lookup) ? asOfMarks(withPolicy(lookup.entry, policy), lookup.mark) : undefined;
}

export function fromEntry(entry: CacheEntry, at: number, status: CacheStatus, upstreamMs?: number): ReadOutcome {
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

/** An origin's answer passed on as it came (not kept): a 401/403/429 or other 4xx. */
export function fromAnswer(answer: OriginAnswer): ReadOutcome {
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

/** A stale copy within stale-if-error at `at`, for a failed or rate-limited fill. */
export function staleIfError(
  stale: CacheEntry | undefined,
  policy: EffectivePolicy,
  at: number,
  fwdStatus: number,
  upstreamMs: number | undefined,
): ReadOutcome | undefined {
  if (stale === undefined || at >= staleIfErrorUntil(stale, policy)) return undefined;
  return fromEntry(
    stale,
    at,
    { kind: 'stale-if-error', ttl: wholeSeconds(stale.freshUntil - at), fwdStatus },
    upstreamMs,
  );
}
