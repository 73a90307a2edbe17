/**
 * The requests of this replica waiting for an upstream slot, first come first served. A request
 * that stops waiting (its bound wait is over) just leaves the line: it consumes nothing, and a slot
 * granted for it goes to the next one (issue 8: under overload, waiters that had given up still
 * spent the budget).
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

export class SlotWaiters {
  /** Insertion-ordered: the first entry is the longest waiting. */
  readonly #line = new Map<number, Waiter>();
  #next = 0;

  get size(): number {
    return this.#line.size;
  }

  /** Resolves with a slot, or `undefined` when `maxWaitMs` passed (or the line was closed) first. */
  wait(maxWaitMs: number): Promise<Slot | undefined> {
    const id = this.#next++;
    return new Promise<Slot | undefined>((resolve) => {
      const timer = setTimeout(() => {
        this.#line.delete(id);
        resolve(undefined);
      }, maxWaitMs);
      this.#line.set(id, {
        take: (slot) => {
          clearTimeout(timer);
          this.#line.delete(id);
          resolve(slot);
        },
      });
    });
  }

  /** Gives `slot` to the longest waiting; `false` when nobody waits (the slot is not taken). */
  hand(slot: Slot): boolean {
    const first = this.#line.values().next();
    if (first.done === true) return false;
    first.value.take(slot);
    return true;
  }

  /** Everyone waiting is refused now. */
  refuseAll(): void {
    for (const waiter of [...this.#line.values()]) waiter.take(undefined);
  }
}
