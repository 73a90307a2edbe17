/**
 * Lifetimes from what the proxy sees change (docs/cache.md#automatic-lifetimes), for a resource
 * whose policy has `autoTtl`: each page gets a lifetime from its own history, kept in its entry,
 * within the policy's `min` and `max`.
 *
 * - A first fill starts from RFC 9111 §4.2.2's heuristic when the upstream sends `Last-Modified`
 *   (a tenth of the time since the page last changed), else from the policy's `ttl`.
 * - A refresh that finds the page unchanged (a 304, or the same body) doubles it, or takes the
 *   heuristic when that is longer: the page has gone that long without a change.
 * - A refresh that finds a new body halves the shorter of its lifetime and how long it was held:
 *   the page changes at least that often.
 *
 * So a page that changes every few seconds settles within a factor of two of its change interval
 * and one that never changes reaches `max` in a few refreshes, each in a handful of steps from
 * wherever it starts (multiplicative increase and decrease, as TCP's window finds a link's rate).
 */
import type { CacheEntry } from './entry.js';

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

function clamp(ms: number, bounds: AutoTtl): number {
  return Math.round(Math.min(bounds.max * 1000, Math.max(bounds.min * 1000, ms)));
}

/** A tenth of the time since the page last changed; `undefined` without a usable `Last-Modified`. */
function heuristicMs(lastModified: string | undefined, at: number): number | undefined {
  if (lastModified === undefined) return undefined;
  const changedAt = Date.parse(lastModified);
  return Number.isFinite(changedAt) && changedAt <= at ? (at - changedAt) * HEURISTIC_FRACTION : undefined;
}

/** The lifetime the previous entry had: its own, or the policy's `ttl` for one filled without. */
function lifetimeOf(previous: CacheEntry, startMs: number): number {
  return previous.autoLifetimeMs ?? startMs;
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
  const heuristic = heuristicMs(lastModified, at);
  switch (evidence.kind) {
    case 'first':
      return clamp(heuristic ?? startMs, bounds);
    case 'unchanged':
      return clamp(Math.max(2 * lifetimeOf(evidence.previous, startMs), heuristic ?? 0), bounds);
    case 'changed': {
      const held = Math.max(0, at - evidence.previous.storedAt);
      return clamp(Math.min(lifetimeOf(evidence.previous, startMs), held) / 2, bounds);
    }
  }
}
