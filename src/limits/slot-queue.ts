/**
 * Waiting for an upstream slot without paying for giving up (issue 8: under overload, misses that
 * gave up left jobs in bottleneck's queue that still ran and spent the budget; the upstream got
 * 3.4 requests/s of the 16 it allowed, then none).
 *
 * Requests never enter bottleneck's queue themselves. They wait here, in a FIFO of their own, and a
 * few *tickets* go through bottleneck on their behalf: when bottleneck starts a ticket (a slot is
 * free and the rate allows a start, for every replica together) the ticket is handed to the first
 * request still waiting, and holds the slot until that request's exchange is over. A request that
 * stops waiting just leaves the FIFO: it consumes nothing, and the ticket it would have had goes to
 * the next one. Only when nobody at all waits does a started ticket go unused (it gives its slot
 * back at once); at most `maxPending` tickets per replica are ever outstanding, so that waste is
 * bounded and happens only when there is no demand.
 */
import type Bottleneck from 'bottleneck';

export interface Slot {
  /** Gives the slot back (bottleneck frees it, in Redis when clustered, afterwards). */
  release(): void;
}

export interface SlotQueueOptions {
  readonly limiter: Bottleneck;
  /** Tickets outstanding in bottleneck (submitted, not yet started) at most. */
  readonly maxPending: number;
  /**
   * Each ticket's `expiration`, ms: a slot whose release never reaches Redis (a failover, a dropped
   * connection, a dead replica) is freed by bottleneck's own scripts after this long (bottleneck
   * issue #197). Longer than any exchange a slot is held for.
   */
  readonly expirationMs: number;
  /** Told when bottleneck fails a ticket (its Redis failed): the waiters are refused meanwhile. */
  readonly onFailure?: (error: unknown) => void;
}

interface Waiter {
  grant(slot: Slot): void;
}

export type Acquired =
  | { readonly kind: 'slot'; readonly slot: Slot }
  | { readonly kind: 'timeout' }
  | { readonly kind: 'failed' };

export class SlotQueue {
  readonly #limiter: Bottleneck;
  readonly #maxPending: number;
  readonly #expirationMs: number;
  readonly #onFailure: ((error: unknown) => void) | undefined;
  /** Insertion-ordered: the first entry is the longest waiting. */
  readonly #waiters = new Map<number, Waiter>();
  /** Failure callbacks of the waiting requests, so a failing limiter refuses them at once. */
  readonly #failers = new Map<number, () => void>();
  #nextId = 0;
  #pending = 0;
  #closed = false;

  constructor(options: SlotQueueOptions) {
    this.#limiter = options.limiter;
    this.#maxPending = Math.max(1, options.maxPending);
    this.#expirationMs = options.expirationMs;
    this.#onFailure = options.onFailure;
  }

  /** Requests waiting for a slot now. */
  get waiting(): number {
    return this.#waiters.size;
  }

  /** Waits at most `maxWaitMs` for a slot. */
  acquire(maxWaitMs: number): Promise<Acquired> {
    if (this.#closed) return Promise.resolve({ kind: 'failed' });
    const id = this.#nextId++;
    return new Promise<Acquired>((resolve) => {
      const leave = (): void => {
        clearTimeout(timer);
        this.#waiters.delete(id);
        this.#failers.delete(id);
      };
      const timer = setTimeout(() => {
        leave();
        resolve({ kind: 'timeout' });
      }, maxWaitMs);
      this.#waiters.set(id, {
        grant: (slot) => {
          leave();
          resolve({ kind: 'slot', slot });
        },
      });
      this.#failers.set(id, () => {
        leave();
        resolve({ kind: 'failed' });
      });
      this.#pump();
    });
  }

  /** Refuses everyone waiting; tickets already in bottleneck are given back as they start. */
  close(): void {
    this.#closed = true;
    for (const fail of [...this.#failers.values()]) fail();
  }

  #pump(): void {
    while (!this.#closed && this.#pending < Math.min(this.#waiters.size, this.#maxPending)) this.#submitTicket();
  }

  #submitTicket(): void {
    this.#pending += 1;
    let started = false;
    const ticket = this.#limiter.schedule({ expiration: this.#expirationMs }, () => {
      started = true;
      this.#pending -= 1;
      const first = this.#waiters.values().next();
      if (first.done === true) {
        // Nobody waits any more: the slot goes back at once.
        this.#pump();
        return Promise.resolve();
      }
      return new Promise<void>((release) => {
        first.value.grant({ release: () => release() });
        this.#pump();
      });
    });
    ticket.catch((error: unknown) => {
      if (started) return; // expired or failed after the exchange began: the holder is unaffected
      this.#pending -= 1;
      this.#onFailure?.(error);
      // The limiter cannot give slots now (its Redis failed): nobody is left hanging on it.
      for (const fail of [...this.#failers.values()]) fail();
    });
  }
}
