/**
 * This replica's prefetches (docs/cache.md#prefetch): how many are in flight, in all and per
 * company, each bounded; and the pages fetched ahead that no request has taken yet, which are used
 * when one does and wasted once they expire unused (the measure of whether prefetching pays).
 */

export interface PrefetchLedgerOptions {
  /** Prefetches in flight on this replica, at most. */
  readonly maxInFlight: number;
  /** Prefetches in flight for one company, at most. */
  readonly maxPerCompany: number;
  /** Pages remembered as fetched ahead and not taken, at most (the oldest count as wasted). */
  readonly maxWaiting?: number;
}

/** How often the pages fetched ahead are swept for the expired, ms. */
const SWEEP_EVERY_MS = 1_000;

export class PrefetchLedger {
  readonly #maxInFlight: number;
  readonly #maxPerCompany: number;
  readonly #maxWaiting: number;
  #inFlight = 0;
  readonly #byCompany = new Map<string, number>();
  /** Cache key → until when the page fetched ahead is fresh; in the order they were fetched. */
  readonly #waiting = new Map<string, number>();
  #sweptAt = 0;

  constructor(options: PrefetchLedgerOptions) {
    if (!(Number.isInteger(options.maxInFlight) && options.maxInFlight >= 1))
      throw new TypeError('cache.prefetch.maxConcurrent must be an integer of at least 1');
    if (!(Number.isInteger(options.maxPerCompany) && options.maxPerCompany >= 1))
      throw new TypeError('cache.prefetch.maxPerCompany must be an integer of at least 1');
    this.#maxInFlight = options.maxInFlight;
    this.#maxPerCompany = options.maxPerCompany;
    this.#maxWaiting = options.maxWaiting ?? 10_000;
  }

  /** A prefetch for `company` may start: counted until `end`. False when a bound is reached. */
  tryStart(company: string): boolean {
    const own = this.#byCompany.get(company) ?? 0;
    if (this.#inFlight >= this.#maxInFlight || own >= this.#maxPerCompany) return false;
    this.#inFlight += 1;
    this.#byCompany.set(company, own + 1);
    return true;
  }

  end(company: string): void {
    this.#inFlight -= 1;
    const own = (this.#byCompany.get(company) ?? 1) - 1;
    if (own <= 0) this.#byCompany.delete(company);
    else this.#byCompany.set(company, own);
  }

  /** Whether any page fetched ahead waits for a request (none: a hit has nothing to count). */
  get waiting(): boolean {
    return this.#waiting.size > 0;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /** A page was fetched ahead; it waits for a request until `until`. Returns the pages it pushed out (wasted). */
  fetched(key: string, until: number): number {
    this.#waiting.delete(key);
    this.#waiting.set(key, until);
    let pushedOut = 0;
    while (this.#waiting.size > this.#maxWaiting) {
      const oldest = this.#waiting.keys().next();
      if (oldest.done === true) break;
      this.#waiting.delete(oldest.value);
      pushedOut += 1;
    }
    return pushedOut;
  }

  /**
   * A request was answered with `key`'s page: `used` when it had been fetched ahead and was still
   * fresh, `wasted` when it had expired untaken, else nothing (no page of this key was waiting).
   */
  take(key: string, at: number): 'used' | 'wasted' | undefined {
    if (this.#waiting.size === 0) return undefined; // the usual case: nothing to look up
    const until = this.#waiting.get(key);
    if (until === undefined) return undefined;
    this.#waiting.delete(key);
    return at < until ? 'used' : 'wasted';
  }

  /** The pages fetched ahead that expired untaken since the last sweep (at most one sweep a second). */
  sweep(at: number): number {
    if (at - this.#sweptAt < SWEEP_EVERY_MS) return 0;
    this.#sweptAt = at;
    let wasted = 0;
    for (const [key, until] of this.#waiting) {
      if (until > at) continue;
      this.#waiting.delete(key);
      wasted += 1;
    }
    return wasted;
  }
}
