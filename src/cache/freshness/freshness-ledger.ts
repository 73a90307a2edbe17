/**
 * This replica's record of what its fills learnt about each resource's pages, for the freshness
 * advice (docs/cache.md#freshness-advice): the last ten minutes, in one-minute buckets per resource.
 * Memory is bounded by construction: at most one ring of ten buckets for each of the catalog's
 * resources, a few numbers each, and nothing per page. What a change interval needs of a page (how
 * long its copy was held, its previous `Last-Modified`) comes with the fill itself, in the entry it
 * refreshed.
 */
import { RESOURCE_NAMES, type ResourceName } from '../../catalog/resources.js';
import type { Metrics } from '../../observability/metrics.js';
import type { FillObservation } from '../read/fill-result.js';
import { refreshAheadAt } from '../read/refresh-ahead.js';
import { adviceFor, type ResourceFreshness, type WindowTotals } from './freshness-advice.js';

/** The window of the advice: this many one-minute buckets, the current one included. */
export const WINDOW_MINUTES = 10;
const MINUTE_MS = 60_000;
/**
 * The shortest span the per-minute figures are taken over, seconds: a replica's first seconds count
 * as a whole minute, so that a first burst of fills is not extrapolated into a rate.
 */
const MIN_WINDOW_SECONDS = 60;

export interface FreshnessAdvice {
  readonly resources: readonly ResourceFreshness[];
  /** The span the per-minute figures are over: the window, or less since the replica started. */
  readonly windowSeconds: number;
  readonly targetSeconds: number;
}

export interface FreshnessLedgerOptions {
  readonly now: () => number;
  /** Counts the upstream's body bytes per resource (`slab_proxy_upstream_fill_bytes_total`). */
  readonly metrics?: Pick<Metrics, 'upstreamFillBytes'> | undefined;
  /**
   * The last fraction of a copy's lifetime in which a read refreshes it ahead (`cache.refresh.ahead`,
   * as the read service is given it); 0 (the default): once stale.
   */
  readonly refreshAhead?: number | undefined;
  /**
   * How long past its TTL a resource's copy is served while one refresh runs, seconds (the policy's
   * stale-while-revalidate in force); none by default: a read past the TTL waits for the fill.
   */
  readonly staleWindowOf?: ((resource: ResourceName) => number) | undefined;
  /**
   * A resource's reads answered since the start (`Metrics.readsOf`): with it the readers' wait is
   * weighed by reads, not by refreshes (freshness-advice.ts, `adviceFor`).
   */
  readonly readsOf?: ((resource: ResourceName) => number) | undefined;
}

/** One minute of one resource's fills. */
interface MinuteCounts {
  /** Minutes since the epoch. */
  minute: number;
  fills: number;
  refreshes: number;
  unchanged: number;
  changed: number;
  heldMs: number;
  waitedMs: number;
  bytes: number;
  lastModifiedChanges: number;
  lastModifiedMs: number;
  /** The resource's reads since the start when the minute's first fill was counted; undefined: none. */
  readsAt: number | undefined;
}

export class FreshnessLedger {
  readonly #rings = new Map<ResourceName, MinuteCounts[]>();
  readonly #startedAt: number;
  readonly #metrics: Pick<Metrics, 'upstreamFillBytes'> | undefined;
  readonly #ahead: number;
  readonly #staleWindowOf: (resource: ResourceName) => number;
  readonly #readsOf: ((resource: ResourceName) => number) | undefined;

  constructor(options: FreshnessLedgerOptions) {
    this.#readsOf = options.readsOf;
    this.#startedAt = options.now();
    this.#metrics = options.metrics;
    this.#ahead = options.refreshAhead ?? 0;
    this.#staleWindowOf = options.staleWindowOf ?? (() => 0);
  }

  /** The buckets held, every resource's together: at most resources × `WINDOW_MINUTES`. */
  get bucketsHeld(): number {
    let held = 0;
    for (const ring of this.#rings.values()) held += ring.length;
    return held;
  }

  /** Counts one fill in its resource's bucket of the minute it was answered. */
  observe(observation: FillObservation): void {
    const { address, outcome, previous, bytes, at } = observation;
    this.#metrics?.upstreamFillBytes(address.group.resource, bytes);
    const counts = this.#bucket(address.group.resource, Math.floor(at / MINUTE_MS));
    // A fill answered before the window (a slow exchange reported late) is no longer counted.
    if (counts === undefined) return;
    counts.readsAt ??= this.#readsOf?.(address.group.resource);
    counts.bytes += bytes;
    if (outcome === 'filled' || previous === undefined) {
      counts.fills++;
      return;
    }
    counts.refreshes++;
    counts.heldMs += Math.max(0, at - previous.storedAt);
    // Past the point where a read could start this refresh (refresh-ahead.ts, the copy's own): the
    // wait for that read and the refresh, what the stale share's cycle needs of the readers.
    const point = refreshAheadAt(address.key, previous.storedAt, previous.freshUntil, this.#ahead);
    counts.waitedMs += Math.max(0, at - point);
    if (outcome === 'modified') counts.changed++;
    else counts.unchanged++;
    const gap = lastModifiedGap(previous.lastModified, observation.lastModified);
    if (gap !== undefined) {
      counts.lastModifiedChanges++;
      counts.lastModifiedMs += gap;
    }
  }

  /**
   * The advice at `now`, for each resource with fills in the window (catalog order): its figures
   * over the window, judged against `targetSeconds` of expected staleness under the TTL `ttlOf` it,
   * its stale window and the refresh-ahead fraction.
   */
  advice(targetSeconds: number, ttlOf: (resource: ResourceName) => number, now: number): FreshnessAdvice {
    const current = Math.floor(now / MINUTE_MS);
    const windowStart = Math.max(this.#startedAt, (current - WINDOW_MINUTES + 1) * MINUTE_MS);
    const windowSeconds = Math.max(MIN_WINDOW_SECONDS, (now - windowStart) / 1000);
    const resources: ResourceFreshness[] = [];
    for (const resource of RESOURCE_NAMES) {
      const ring = this.#rings.get(resource);
      const totals = ring === undefined ? undefined : totalsOf(ring, current, this.#readsOf?.(resource));
      if (totals === undefined || totals.fills + totals.refreshes === 0) continue;
      const serving = { ttl: ttlOf(resource), staleWindow: this.#staleWindowOf(resource), ahead: this.#ahead };
      resources.push(adviceFor(resource, totals, serving, targetSeconds, windowSeconds / 60));
    }
    return { resources, windowSeconds, targetSeconds };
  }

  /**
   * The bucket of `minute` in the resource's ring (slot `minute mod WINDOW_MINUTES`), emptied
   * first when it still holds an older minute; undefined when the slot has moved on to a later one.
   */
  #bucket(resource: ResourceName, minute: number): MinuteCounts | undefined {
    let ring = this.#rings.get(resource);
    if (ring === undefined) {
      ring = Array.from({ length: WINDOW_MINUTES }, () => emptyMinute(Number.NEGATIVE_INFINITY));
      this.#rings.set(resource, ring);
    }
    const slot = ((minute % WINDOW_MINUTES) + WINDOW_MINUTES) % WINDOW_MINUTES;
    const held = ring[slot];
    if (held === undefined || held.minute > minute) return undefined;
    if (held.minute < minute) Object.assign(held, emptyMinute(minute));
    return held;
  }
}

function emptyMinute(minute: number): MinuteCounts {
  return {
    minute,
    fills: 0,
    refreshes: 0,
    unchanged: 0,
    changed: 0,
    heldMs: 0,
    waitedMs: 0,
    bytes: 0,
    lastModifiedChanges: 0,
    lastModifiedMs: 0,
    readsAt: undefined,
  };
}

/**
 * A ring's buckets of the window ending with minute `current`, summed; with `readsNow` (the
 * resource's reads since the start), the reads since the window's first counted fill.
 */
function totalsOf(ring: readonly MinuteCounts[], current: number, readsNow: number | undefined): WindowTotals {
  const sum = emptyMinute(current);
  let readsFrom: number | undefined;
  for (const counts of ring) {
    if (counts.minute > current || counts.minute <= current - WINDOW_MINUTES) continue;
    if (counts.readsAt !== undefined) readsFrom = Math.min(readsFrom ?? counts.readsAt, counts.readsAt);
    sum.fills += counts.fills;
    sum.refreshes += counts.refreshes;
    sum.unchanged += counts.unchanged;
    sum.changed += counts.changed;
    sum.heldMs += counts.heldMs;
    sum.waitedMs += counts.waitedMs;
    sum.bytes += counts.bytes;
    sum.lastModifiedChanges += counts.lastModifiedChanges;
    sum.lastModifiedMs += counts.lastModifiedMs;
  }
  return {
    fills: sum.fills,
    refreshes: sum.refreshes,
    unchanged: sum.unchanged,
    changed: sum.changed,
    heldSeconds: sum.heldMs / 1000,
    waitedSeconds: sum.waitedMs / 1000,
    bytes: sum.bytes,
    lastModifiedChanges: sum.lastModifiedChanges,
    lastModifiedSeconds: sum.lastModifiedMs / 1000,
    ...(readsNow !== undefined && readsFrom !== undefined && { reads: readsNow - readsFrom }),
  };
}

/**
 * How much later the upstream's `Last-Modified` is than the one of the copy held, ms: one gap
 * between distinct values for the same page. Undefined when either is missing or unreadable, or
 * the value did not move forward.
 */
function lastModifiedGap(held: string | undefined, answered: string | undefined): number | undefined {
  if (held === undefined || answered === undefined) return undefined;
  const gap = Date.parse(answered) - Date.parse(held);
  return Number.isFinite(gap) && gap > 0 ? gap : undefined;
}
