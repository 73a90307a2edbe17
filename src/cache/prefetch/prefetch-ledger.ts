/**
 * This replica's prefetches (docs/cache.md#prefetch): how many are in flight, in all and per
 * company, each bounded; and the pages this replica fetched ahead, until they expire: then the
 * store says whether any request of the fleet took them (used, counted by the replica that took
 * it) or none did (wasted, counted here).
 */
import type { CacheAddress } from '../entry/cache-key.js';

export interface PrefetchLedgerOptions {
  /** Prefetches in flight on this replica, at most. */
  readonly maxInFlight: number;
  /** Prefetches in flight for one company, at most. */
  readonly maxPerCompany: number;
  /** Pages remembered as fetched ahead, at most (the oldest are let go early). */
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
  /** Cache key → the page fetched ahead and until when it is fresh; in the order they were fetched. */
  readonly #waiting = new Map<string, { readonly address: CacheAddress; readonly until: number }>();
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

  /** Whether any page fetched ahead is remembered (none: nothing to sweep). */
  get waiting(): boolean {
    return this.#waiting.size > 0;
  }

  get inFlight(): number {
    return this.#inFlight;
  }

  /** A page was fetched ahead, fresh until `until`. Returns the pages it pushed out (let go unexpired). */
  fetched(address: CacheAddress, until: number): CacheAddress[] {
    this.#waiting.delete(address.key);
    this.#waiting.set(address.key, { address, until });
    const pushedOut: CacheAddress[] = [];
    while (this.#waiting.size > this.#maxWaiting) {
      const oldest = this.#waiting.entries().next();
      if (oldest.done === true) break;
      this.#waiting.delete(oldest.value[0]);
      pushedOut.push(oldest.value[1].address);
    }
    return pushedOut;
  }

  /** The pages fetched ahead that have expired since the last sweep (at most one sweep a second). */
  sweep(at: number): CacheAddress[] {
    if (at - this.#sweptAt < SWEEP_EVERY_MS) return [];
    this.#sweptAt = at;
    const expired: CacheAddress[] = [];
    for (const [key, page] of this.#waiting) {
      if (page.until > at) continue;
      this.#waiting.delete(key);
      expired.push(page.address);
    }
    return expired;
  }
}
