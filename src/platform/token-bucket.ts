/**
 * A token bucket: it holds `burst` tokens at most (and at the start) and gains `perSecond` a
 * second; a take of `count` is all or nothing, so that a refused batch can be sent
 * again whole. Per process: the change feed's limit on `POST /admin/cache/invalidate`
 * (docs/operations.md#the-change-feed), where a token is one change, and the ceiling on automatic
 * lifetimes' early refreshes (src/cache/read/auto-refresh-budget.ts), whose settings follow the
 * replicas counted: settings given as a function are read at each take.
 */

export interface BucketSettings {
  readonly perSecond: number;
  /** Tokens held at most, and at the start. */
  readonly burst: number;
}

/** A take: done, or refused with the wait until the bucket holds the count (ms). */
export type BucketTake = { readonly taken: true } | { readonly taken: false; readonly waitMs: number };

export class TokenBucket {
  readonly #settings: () => BucketSettings;
  readonly #now: () => number;
  #tokens: number;
  #at: number;

  constructor(settings: BucketSettings | (() => BucketSettings), now: () => number = Date.now) {
    this.#settings = typeof settings === 'function' ? settings : () => settings;
    this.#now = now;
    this.#tokens = this.#settings().burst;
    this.#at = now();
  }

  get burst(): number {
    return this.#settings().burst;
  }

  /** Takes `count` tokens, at most `burst` (a larger count could never be taken: the caller refuses it). */
  take(count: number): BucketTake {
    const settings = this.#settings();
    if (count > settings.burst) throw new RangeError(`a take of ${String(count)} exceeds the burst`);
    this.#refill(settings);
    if (count <= this.#tokens) {
      this.#tokens -= count;
      return { taken: true };
    }
    return { taken: false, waitMs: ((count - this.#tokens) * 1000) / settings.perSecond };
  }

  /** A clock that steps back adds nothing, and takes nothing away. */
  #refill({ perSecond, burst }: BucketSettings): void {
    const at = this.#now();
    const elapsedMs = Math.max(0, at - this.#at);
    this.#tokens = Math.min(burst, this.#tokens + (elapsedMs * perSecond) / 1000);
    this.#at = Math.max(at, this.#at);
  }
}
