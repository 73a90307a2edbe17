/**
 * A cached page's times, in one place (docs/cache.md: Freshness, Revalidation, Soft invalidation,
 * Automatic lifetimes, Prefetch): how long it is fresh, when it stops being fresh, how long it is
 * kept, how long past its freshness it is served while one refresh runs or while the upstream
 * fails, and how long any page of a policy may be kept. Everything else asks here rather than adding
 * a policy's seconds to a time. Policies are whole seconds; every time here is ms since the epoch,
 * every duration ms. Pure.
 *
 *   storedAt ── lifetime ──▶ freshUntil ── stale-while-revalidate ──▶ (refreshed while served)
 *                                       ── stale-if-error ──────────▶ (served on a failure)
 *                                       ── max of the two (a minute at least if fetched ahead) ──▶ keepUntil
 */
import type { CacheEntry } from '../entry/entry.js';
import { type LifetimeEvidence, nextLifetime, withinBounds } from './auto-lifetime.js';
import type { EffectivePolicy } from './policy.js';

/** How long past its freshness a page fetched ahead is kept at least, s (docs/cache.md#prefetch). */
const AHEAD_KEPT_SECONDS = 60;

function ms(seconds: number): number {
  return seconds * 1000;
}

/**
 * The lifetime a policy gives an answer of `status` that has none of its own, ms (RFC 9111 §4.2.1,
 * the freshness lifetime): a 200 its `ttl`, a record's 404 its `notFoundTtl` (docs/cache.md, what
 * is cached).
 */
export function policyLifetimeMs(status: number, policy: EffectivePolicy): number {
  return ms(status === 200 ? policy.ttl : policy.notFoundTtl);
}

/**
 * How long an entry is fresh under the policy in force (not the one it was stored under), ms: a
 * 404 its `notFoundTtl`; a 200 its `ttl`, or under automatic lifetimes its own lifetime within the
 * bounds in force, the `ttl` for an entry filled without one (docs/cache.md#automatic-lifetimes).
 */
export function lifetimeMs(entry: CacheEntry, policy: EffectivePolicy): number {
  const bounds = policy.autoTtl;
  if (entry.status !== 200 || bounds === undefined) return policyLifetimeMs(entry.status, policy);
  return withinBounds(entry.autoLifetimeMs ?? ms(policy.ttl), bounds);
}

/**
 * When an entry stops being fresh under the policy in force: its lifetime from its storing (RFC
 * 9111 §4.2.1). A run-time TTL override applies to pages already cached too
 * (docs/operations.md#the-operator-api).
 */
export function freshUntilUnder(entry: CacheEntry, policy: EffectivePolicy): number {
  return entry.storedAt + lifetimeMs(entry, policy);
}

/**
 * The freshness lifetime an entry serves with, ms: from its storing to when it stops being fresh,
 * as it stands (the policy in force and its invalidation marks applied); what `max-age` tells a
 * client (RFC 9111 §4.2.1, §5.2.2.1).
 */
export function servedLifetimeMs(entry: CacheEntry): number {
  return entry.freshUntil - entry.storedAt;
}

/**
 * How long a page is kept past `freshUntil` at the longest it may be served stale: the longer of
 * the policy's stale-while-revalidate and stale-if-error (RFC 5861 §3, §4; docs/cache.md, "kept
 * until ttl + max(staleWhileRevalidate, staleIfError)"); a page fetched ahead at least a minute,
 * for its replica to read whether a request took it (docs/cache.md#prefetch; a longer keep serves
 * nothing stale: the windows do).
 */
export function keepUntil(freshUntil: number, policy: EffectivePolicy, ahead: boolean): number {
  const kept = freshUntil + ms(Math.max(policy.staleWhileRevalidate, policy.staleIfError));
  return ahead ? Math.max(kept, freshUntil + ms(AHEAD_KEPT_SECONDS)) : kept;
}

/**
 * The times of an entry stored at `storedAt` for an answer of `status` under the policy in force:
 * fresh for its own lifetime when the policy gives pages theirs (`autoLifetimeMs`, from
 * `nextLifetimeMs`), else for the policy's lifetime (`policyLifetimeMs`); kept until `keepUntil`.
 * A fill stores these; a revalidation (RFC 9111 §4.3.4) renews them from its own time.
 */
export function filledTimes(
  status: number,
  policy: EffectivePolicy,
  storedAt: number,
  autoLifetimeMs: number | undefined,
  ahead: boolean,
): Pick<CacheEntry, 'storedAt' | 'freshUntil' | 'keepUntil' | 'autoLifetimeMs'> {
  const freshUntil = storedAt + (autoLifetimeMs ?? policyLifetimeMs(status, policy));
  return { storedAt, freshUntil, keepUntil: keepUntil(freshUntil, policy, ahead), autoLifetimeMs };
}

/**
 * A page's next own lifetime, ms, at a fill that found `evidence` (auto-lifetime.ts), starting from
 * the policy's `ttl`: none without automatic lifetimes, and none for a 404. One shorter than the
 * `ttl` needs a token of the ceiling (`mayShorten`, asked only then: auto-refresh-budget.ts);
 * without one the page lives `ttl`, so automatic lifetimes cost the upstream no more than the fixed
 * `ttl` would, plus the ceiling's refreshes (docs/cache.md#automatic-lifetimes). `now` is read only
 * for a page that gets a lifetime.
 */
export function nextLifetimeMs(
  status: number,
  policy: EffectivePolicy,
  evidence: LifetimeEvidence,
  lastModified: string | undefined,
  now: () => number,
  mayShorten: () => boolean,
): number | undefined {
  const bounds = policy.autoTtl;
  if (bounds === undefined || status !== 200) return undefined;
  const ttlMs = ms(policy.ttl);
  const lifetime = nextLifetime(evidence, lastModified, now(), ttlMs, bounds);
  return lifetime >= ttlMs || mayShorten() ? lifetime : ttlMs;
}

/**
 * How long past its freshness a page living `lifetime` ms is served while one refresh runs, ms (RFC
 * 5861 §3): the policy's stale-while-revalidate; under automatic lifetimes no longer than the
 * page's lifetime, so a page that changes every few seconds waits for its refresh rather than be
 * served tens of seconds old (docs/cache.md#automatic-lifetimes).
 */
export function revalidateWindowMs(policy: EffectivePolicy, lifetime: number): number {
  const window = ms(policy.staleWhileRevalidate);
  return policy.autoTtl === undefined ? window : Math.min(window, lifetime);
}

/**
 * When an entry stops being served stale while one refresh runs: its stale-while-revalidate window
 * past its freshness (`revalidateWindowMs`), and for a page the system of record said changed at
 * most `invalidatedStaleForMs` (`cache.invalidation.staleFor`; absent: the window alone) past it
 * (docs/cache.md#soft-invalidation): a hot page is read again within it and refreshed without a
 * wait, one read later waits for its conditional refresh.
 */
export function revalidatingUntil(
  entry: CacheEntry,
  policy: EffectivePolicy,
  invalidatedStaleForMs: number | undefined,
): number {
  const window = revalidateWindowMs(policy, lifetimeMs(entry, policy));
  const served = entry.invalidatedAt === undefined ? window : Math.min(window, invalidatedStaleForMs ?? window);
  return entry.freshUntil + served;
}

/**
 * When an entry stops being served on an upstream failure or 429: the policy's stale-if-error past
 * its freshness (RFC 5861 §4; docs/cache.md, Freshness).
 */
export function staleIfErrorUntil(entry: CacheEntry, policy: EffectivePolicy): number {
  return entry.freshUntil + ms(policy.staleIfError);
}

/**
 * How long any entry filled under a policy may be kept at most, ms: its longest freshness (`ttl`,
 * `notFoundTtl`, or automatic lifetimes' `max`), its longer stale window and the minute a page
 * fetched ahead is kept (`keepUntil`). A record's invalidation mark lives that long: by then every
 * entry filled before it has gone (docs/cache.md#soft-invalidation, what survives).
 */
export function longestKeptMs(policy: EffectivePolicy): number {
  const fresh = Math.max(policy.ttl, policy.notFoundTtl, policy.autoTtl?.max ?? 0);
  return ms(fresh + Math.max(policy.staleWhileRevalidate, policy.staleIfError) + AHEAD_KEPT_SECONDS);
}
