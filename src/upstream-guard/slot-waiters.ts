/**
 * The requests of this replica waiting for an upstream slot. A request that stops waiting (its
 * bound wait is over) just leaves the line: it consumes nothing, and a slot granted for it goes to
 * the next one. Requests wait in a fair line (fair-line.ts): companies in turn, each company's
 * requests first come first served, so that one company's storm of misses cannot hold the line
 * against another's (docs/limits.md#fair-shares).
 *
 * Prefetches wait in a second line, served only when the first is empty, and take only a slot
 * that can start at once (within the spacing between starts): a prefetch never waits ahead of a
 * client's request, whatever its company, nor holds a slot whose start is further off. A prefetch
 * that a client's request has joined is promoted: it joins its company's line, and waits from then
 * on as long as a request would.
 */
import { FairLine } from './fair-line.js';

export interface Slot {
  readonly id: string;
  /** Not before this (this replica's clock): when the slot's start is due at the latest. */
  readonly startAt: number;
  /** Not after this: a request that cannot start by then gives the slot back unused. */
  readonly startBy: number;
}

interface Waiter {
  readonly company: string;
  readonly take: (slot: Slot | undefined) => void;
}

/** How a prefetch waiting in the second line becomes a request's wait. */
export interface SparePromotion {
  /** Runs `promote` when a client's request joins the prefetch (at once if one has). */
  readonly whenPromoted: (promote: () => void) => void;
  /** How long the promoted wait lasts from then on, ms: a request's bound. */
  readonly waitMs: number;
}

export class SlotWaiters {
  /** Client requests, companies in turn. */
  readonly #line: FairLine<Waiter>;
  /** Prefetches, served when `#line` is empty; insertion-ordered: the first is the longest waiting. */
  readonly #spare = new Map<number, Waiter>();
  readonly #now: () => number;
  readonly #spareLeewayMs: () => number;
  #next = 0;

  /**
   * `spareLeewayMs`: how far ahead a slot's start may be due and still count as one that starts
   * now for a prefetch: the budget's spacing between starts (pacing, not a queue). `weight`: a
   * company's slots per turn in the fair line (1 unless the config or an operator says otherwise).
   */
  constructor(
    now: () => number = Date.now,
    spareLeewayMs: () => number = () => 0,
    weight: (company: string) => number = () => 1,
  ) {
    this.#now = now;
    this.#spareLeewayMs = spareLeewayMs;
    this.#line = new FairLine(weight);
  }

  /** Slots wanted: every request waiting, prefetches included. */
  get size(): number {
    return this.#line.size + this.#spare.size;
  }

  /** Requests waiting in the first line (not prefetches). */
  get requests(): number {
    return this.#line.size;
  }

  /**
   * Resolves with a slot, or `undefined` when `maxWaitMs` passed (or the line was closed) first;
   * `company`: whose request it is (its place in the fair line).
   */
  wait(maxWaitMs: number, company = ''): Promise<Slot | undefined> {
    const id = this.#next++;
    return new Promise<Slot | undefined>((resolve) => {
      const timer = setTimeout(() => {
        if (this.#line.remove(id, company)) resolve(undefined);
      }, maxWaitMs);
      this.#line.add(id, {
        company,
        take: (slot) => {
          clearTimeout(timer);
          this.#line.remove(id, company);
          resolve(slot);
        },
      });
    });
  }

  /** The same, in the prefetches' line, until `promotion` moves it into its company's line. */
  waitSpare(maxWaitMs: number, promotion?: SparePromotion, company = ''): Promise<Slot | undefined> {
    const id = this.#next++;
    const spare = this.#spare;
    const line = this.#line;
    return new Promise<Slot | undefined>((resolve) => {
      let promoted = false;
      let timer = setTimeout(() => {
        spare.delete(id);
        resolve(undefined);
      }, maxWaitMs);
      const waiter: Waiter = {
        company,
        take: (slot) => {
          clearTimeout(timer);
          if (promoted) line.remove(id, company);
          else spare.delete(id);
          resolve(slot);
        },
      };
      spare.set(id, waiter);
      promotion?.whenPromoted(() => {
        if (promoted || spare.get(id) !== waiter) return; // a request already, or done waiting
        spare.delete(id);
        promoted = true;
        line.add(id, waiter);
        clearTimeout(timer);
        timer = setTimeout(() => {
          if (line.remove(id, company)) resolve(undefined);
        }, promotion.waitMs);
      });
    });
  }

  /**
   * Gives `slot` to the longest waiting request of the company whose turn it is, else to the
   * longest waiting prefetch if the slot can start now or within the leeway (a prefetch offered a
   * later one gives up: the budget has no room now); `false` when the slot is not taken.
   */
  hand(slot: Slot): boolean {
    const request = this.#line.peek();
    if (request !== undefined) {
      this.#line.served(request.company);
      request.take(slot);
      return true;
    }
    const spare = this.#spare.values().next();
    if (spare.done === true) return false;
    if (slot.startAt > this.#now() + this.#spareLeewayMs()) {
      spare.value.take(undefined);
      return false;
    }
    spare.value.take(slot);
    return true;
  }

  /** Everyone waiting is refused now. */
  refuseAll(): void {
    for (const waiter of [...this.#line.values(), ...this.#spare.values()]) waiter.take(undefined);
  }
}
