/**
 * The requests of this replica waiting for an upstream slot, first come first served. A request
 * that stops waiting (its bound wait is over) just leaves the line: it consumes nothing, and a slot
 * granted for it goes to the next one (issue 8: under overload, waiters that had given up still
 * spent the budget).
 *
 * Prefetches (issue 19) wait in a second line, served only when the first is empty, and take only
 * a slot that can start at once (within the spacing between starts): a prefetch never waits ahead
 * of a client's request, nor holds a slot whose start is further off. A prefetch that a client's request has joined is promoted: it
 * moves to the end of the first line and waits from then on as long as a request would.
 */

export interface Slot {
  readonly id: string;
  /** Not before this (this replica's clock): when the slot's start is due at the latest. */
  readonly startAt: number;
  /** Not after this: a request that cannot start by then gives the slot back unused. */
  readonly startBy: number;
}

interface Waiter {
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
  /** Insertion-ordered: the first entry is the longest waiting. */
  readonly #line = new Map<number, Waiter>();
  /** Prefetches, served when `#line` is empty. */
  readonly #spare = new Map<number, Waiter>();
  readonly #now: () => number;
  readonly #spareLeewayMs: () => number;
  #next = 0;

  /**
   * `spareLeewayMs`: how far ahead a slot's start may be due and still count as one that starts
   * now for a prefetch: the budget's spacing between starts (pacing, not a queue).
   */
  constructor(now: () => number = Date.now, spareLeewayMs: () => number = () => 0) {
    this.#now = now;
    this.#spareLeewayMs = spareLeewayMs;
  }

  /** Slots wanted: every request waiting, prefetches included. */
  get size(): number {
    return this.#line.size + this.#spare.size;
  }

  /** Requests waiting in the first line (not prefetches). */
  get requests(): number {
    return this.#line.size;
  }

  /** Resolves with a slot, or `undefined` when `maxWaitMs` passed (or the line was closed) first. */
  wait(maxWaitMs: number): Promise<Slot | undefined> {
    return this.#enter(this.#line, maxWaitMs);
  }

  /** The same, in the prefetches' line, until `promotion` moves it into the first. */
  waitSpare(maxWaitMs: number, promotion?: SparePromotion): Promise<Slot | undefined> {
    return this.#enter(this.#spare, maxWaitMs, promotion);
  }

  #enter(first: Map<number, Waiter>, maxWaitMs: number, promotion?: SparePromotion): Promise<Slot | undefined> {
    const id = this.#next++;
    return new Promise<Slot | undefined>((resolve) => {
      let line = first;
      const leave = (): void => {
        line.delete(id);
        resolve(undefined);
      };
      let timer = setTimeout(leave, maxWaitMs);
      const waiter: Waiter = {
        take: (slot) => {
          clearTimeout(timer);
          line.delete(id);
          resolve(slot);
        },
      };
      line.set(id, waiter);
      promotion?.whenPromoted(() => {
        if (line === this.#line || line.get(id) !== waiter) return; // a request already, or done waiting
        line.delete(id);
        line = this.#line;
        line.set(id, waiter);
        clearTimeout(timer);
        timer = setTimeout(leave, promotion.waitMs);
      });
    });
  }

  /**
   * Gives `slot` to the longest waiting request, else to the longest waiting prefetch if the slot
   * can start now or within the leeway (a prefetch offered a later one gives up: the budget has
   * no room now); `false` when the slot is not taken.
   */
  hand(slot: Slot): boolean {
    const first = this.#line.values().next();
    if (first.done !== true) {
      first.value.take(slot);
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
