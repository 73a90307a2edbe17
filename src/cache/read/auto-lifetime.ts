/**
 * Lifetimes from what the proxy sees change (docs/cache.md#automatic-lifetimes), for a resource
 * whose policy has `autoTtl`: each page gets a lifetime from its own history, kept in its entry,
 * within the policy's `min` and `max`. The rule is RFC 9111 §4.2.2's heuristic — a tenth of how
 * long the page goes without changing — with how long that is learnt from the refreshes:
 *
 * - A first fill takes a tenth of the time since the page's `Last-Modified`, never longer than the
 *   policy's `ttl` (what a page did before anyone read it says little of what it does now); the
 *   `ttl` without one.
 * - A refresh that finds the page unchanged (a 304, or the same body) keeps its lifetime, or takes a
 *   tenth of the time since `Last-Modified` when that is longer: the page has gone that long
 *   without a change. Without `Last-Modified`, it doubles.
 * - A refresh that finds a new body takes a tenth of the time between the page's two last changes
 *   (the `Last-Modified` it had and the one it has now: how long it went unchanged last time).
 *   Without them, it halves the shorter of its lifetime and how long it was held: the page changes
 *   at least that often.
 *
 * A read at a random moment of a lifetime a tenth of the change interval misses a change about one
 * time in twenty (1 − (1 − e^−x)/x for x = 0.1): a page that changes every few seconds lives `min`,
 * one that changes every minute about six seconds, one that never changes reaches `max`.
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
  return from !== undefined && to !== undefined && to > from ? (to - from) * HEURISTIC_FRACTION : undefined;
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
  const sinceChange = tenthOf(changedAt, at);
  switch (evidence.kind) {
    case 'first':
      return clamp(Math.min(sinceChange ?? startMs, startMs), bounds);
    case 'unchanged': {
      const lifetime = lifetimeOf(evidence.previous, startMs);
      return clamp(sinceChange === undefined ? 2 * lifetime : Math.max(lifetime, sinceChange), bounds);
    }
    case 'changed': {
      const betweenChanges = tenthOf(dated(evidence.previous.lastModified), changedAt);
      if (betweenChanges !== undefined) return clamp(betweenChanges, bounds);
      const held = Math.max(0, at - evidence.previous.storedAt);
      return clamp(Math.min(lifetimeOf(evidence.previous, startMs), held) / 2, bounds);
    }
  }
}
