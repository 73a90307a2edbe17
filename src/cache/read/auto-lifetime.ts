/**
 * Lifetimes from what the proxy sees change (docs/cache.md#automatic-lifetimes), for a resource
 * whose policy has `autoTtl`: each page gets a lifetime from its own history, kept in its entry,
 * within the policy's `min` and `max`.
 *
 * - A first fill takes RFC 9111 §4.2.2's heuristic, a tenth of the time since the page's
 *   `Last-Modified`, never longer than the policy's `ttl` (what a page did before anyone read it
 *   says little of what it does now); the `ttl` without one.
 * - A refresh that finds a new body takes a quarter of the geometric mean of the policy's `ttl` and
 *   the time between the page's two last changes (the `Last-Modified` it had and the one it has
 *   now): √(interval · ttl) / 4. Without them, it halves the shorter of its lifetime and how long
 *   it was held: the page changes at least that often.
 * - A refresh that finds the page unchanged (a 304, or the same body) keeps its lifetime, or takes
 *   √(time since `Last-Modified` · ttl) / 4 when that is longer: the page has gone that long
 *   without a change. Without `Last-Modified`, it doubles.
 *
 * Why a square root: given a number of refreshes to spend over pages that change at different
 * rates, the lifetimes that leave the fewest stale reads grow with the square root of each page's
 * change interval (a read of a page changing every I, living L ≪ I, is stale about L / 2I of the
 * time; minimising Σ L/2I under Σ 1/L fixed gives L ∝ √I). The policy's `ttl` sets the scale: a
 * page changing every 16 `ttl`s lives the `ttl`, one changing more often less, one changing less
 * often more, so that the refreshes go from the pages that never change to those that do, at about
 * the fixed TTL's total (the quarter is the bench's, docs/benchmarks.md#freshness-of-record).
 */
import type { CacheEntry } from '../entry/entry.js';

/** The bounds of automatic lifetimes, seconds. */
export interface AutoTtl {
  readonly min: number;
  readonly max: number;
}

/** RFC 9111 §4.2.2: "10% of the interval since" `Last-Modified`. */
const HEURISTIC_FRACTION = 0.1;

/** What a fill learnt of its page: nothing held before, or a refresh and whether it found a change. */
export type LifetimeEvidence =
  | { readonly kind: 'first' }
  | { readonly kind: 'unchanged'; readonly previous: CacheEntry }
  | { readonly kind: 'changed'; readonly previous: CacheEntry };

/** `ms` within `bounds` (seconds), ms: what a page's own lifetime is held to. */
export function withinBounds(ms: number, bounds: AutoTtl): number {
  return Math.min(bounds.max * 1000, Math.max(bounds.min * 1000, ms));
}

/** A next lifetime: within `bounds`, whole ms. */
function clamp(ms: number, bounds: AutoTtl): number {
  return Math.round(withinBounds(ms, bounds));
}

/** An HTTP date as ms since the epoch; `undefined` when absent or not a date. */
function dated(httpDate: string | undefined): number | undefined {
  if (httpDate === undefined) return undefined;
  const at = Date.parse(httpDate);
  return Number.isFinite(at) ? at : undefined;
}

/** The lifetime the previous entry had: its own, or the policy's `ttl` for one filled without. */
function lifetimeOf(previous: CacheEntry, startMs: number): number {
  return previous.autoLifetimeMs ?? startMs;
}

/** A tenth of how long the page went without a change, from `from` to `to` (ms); none when not later. */
function tenthOf(from: number | undefined, to: number | undefined): number | undefined {
  const interval = intervalOf(from, to);
  return interval === undefined ? undefined : interval * HEURISTIC_FRACTION;
}

/** How long the page went without a change, from `from` to `to` (ms); none when not later. */
function intervalOf(from: number | undefined, to: number | undefined): number | undefined {
  return from !== undefined && to !== undefined && to > from ? to - from : undefined;
}

/** √(interval · ttl) times this: the lifetime of a page that changes every interval. */
const GEOMETRIC_FRACTION = 0.25;

/**
 * The lifetime of a page that goes `intervalMs` between changes, under a policy whose `ttl` is
 * `startMs`: a quarter of the geometric mean of the two.
 */
function lifetimeFor(intervalMs: number | undefined, startMs: number): number | undefined {
  return intervalMs === undefined ? undefined : Math.sqrt(intervalMs * startMs) * GEOMETRIC_FRACTION;
}

/**
 * The page's next lifetime, ms, within `bounds`: from what this fill learnt (`evidence`), the
 * upstream's `Last-Modified` in this answer, and `startMs` (the policy's `ttl`) for a page with no
 * history.
 */
export function nextLifetime(
  evidence: LifetimeEvidence,
  lastModified: string | undefined,
  at: number,
  startMs: number,
  bounds: AutoTtl,
): number {
  const changedAt = dated(lastModified);
  switch (evidence.kind) {
    case 'first':
      return clamp(Math.min(tenthOf(changedAt, at) ?? startMs, startMs), bounds);
    case 'unchanged': {
      const lifetime = lifetimeOf(evidence.previous, startMs);
      const sinceChange = lifetimeFor(intervalOf(changedAt, at), startMs);
      return clamp(sinceChange === undefined ? 2 * lifetime : Math.max(lifetime, sinceChange), bounds);
    }
    case 'changed': {
      const betweenChanges = lifetimeFor(intervalOf(dated(evidence.previous.lastModified), changedAt), startMs);
      if (betweenChanges !== undefined) return clamp(betweenChanges, bounds);
      const held = Math.max(0, at - evidence.previous.storedAt);
      return clamp(Math.min(lifetimeOf(evidence.previous, startMs), held) / 2, bounds);
    }
  }
}
