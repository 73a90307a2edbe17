/**
 * The upstream budget's arithmetic (docs/limits.md#the-upstream-budget), in one place for both of its stores: the
 * slots held now (each until it is released or its hold runs out), the starts of the last window,
 * and when the latest start is due. `SlotLedger` keeps it in this process; `src/limits/
 * shared-ledger.ts` runs the same rule in Redis, for every replica at once. One contract suite
 * (`test/integration/slot-ledger-contract.test.ts`) holds both to it.
 *
 * A slot is granted when fewer than `maxConcurrent` are held, fewer than `maxPerSecond` started
 * within the window, and its start is due: starts are spaced by window / `maxPerSecond`, so that
 * they reach the upstream evenly rather than in bursts. A grant may name a start up to
 * `RESERVE_AHEAD_MS` ahead (the caller waits for it), so that one call serves several waiters at
 * a high rate.
 *
 * The window is one second and an allowance (`START_ALLOWANCE_MS`): a request reaches the upstream
 * a little after its start is due, and one that does within the allowance still never makes a
 * second at the upstream hold more than `maxPerSecond`. The budget gives a slot back, unused, when
 * it could not send its request within half the allowance (`SEND_BY_MS`): the other half is the
 * request's way to the upstream (this process's event loop, the connection, the upstream's own
 * reading of it), which the proxy does not control (src/upstream-guard/upstream-budget.ts).
 */

export interface BudgetLimits {
  readonly maxConcurrent: number;
  readonly maxPerSecond: number;
}

/** How late after its start is due a request may reach the upstream without breaking the rate, ms. */
export const START_ALLOWANCE_MS = 100;
/** How late after its start is due a request may still be sent, ms: half the allowance. */
export const SEND_BY_MS = START_ALLOWANCE_MS / 2;
/** The window the rate is counted over: one second and the allowance. */
export const RATE_WINDOW_MS = 1_000 + START_ALLOWANCE_MS;
/** How far ahead a grant may name a start, ms. */
export const RESERVE_AHEAD_MS = 50;

/** The time between two starts at `maxPerSecond`, ms. */
export function spacingMs(limits: BudgetLimits): number {
  return RATE_WINDOW_MS / limits.maxPerSecond;
}

export type GrantResult =
  /** The first `startsInMs.length` of the ids asked for, each to start that many ms from now. */
  | { readonly kind: 'granted'; readonly startsInMs: readonly number[] }
  /**
   * None now. `retryInMs`: when the rate allows the next start; `undefined` when the concurrency
   * is what is full (a slot must be released first).
   */
  | { readonly kind: 'full'; readonly retryInMs: number | undefined };

/** A slot as this process holds it: since when, and until when it counts at most. */
interface Hold {
  readonly startedAt: number;
  readonly expiresAt: number;
}

export class SlotLedger {
  readonly #holdMs: number;
  readonly #holds = new Map<string, Hold>();
  /** Start times within the window, in order (the last ones may lie ahead). */
  readonly #starts: number[] = [];
  /** When the latest start granted here is due. */
  #lastStart = Number.NEGATIVE_INFINITY;

  /**
   * `holdMs`: how long a slot counts at most, released or not (the longest exchange and a margin);
   * `Infinity` for slots whose release is never lost (this process's own).
   */
  constructor(holdMs: number) {
    if (!(holdMs > 0)) throw new TypeError('holdMs must be positive');
    this.#holdMs = holdMs;
  }

  /** Slots held now (at `now`). */
  held(now: number): number {
    this.#forget(now);
    return this.#holds.size;
  }

  /** Grants as many of `ids` as the limits allow now, in order. */
  grant(now: number, ids: readonly string[], limits: BudgetLimits): GrantResult {
    this.#forget(now);
    const spacing = spacingMs(limits);
    const startsInMs: number[] = [];
    let next = Math.max(now, this.#lastStart + spacing);
    while (
      startsInMs.length < ids.length &&
      this.#holds.size < limits.maxConcurrent &&
      this.#starts.length < limits.maxPerSecond &&
      next <= now + RESERVE_AHEAD_MS
    ) {
      const id = ids[startsInMs.length] ?? '';
      this.#holds.set(id, { startedAt: next, expiresAt: next + this.#holdMs });
      this.#starts.push(next);
      this.#lastStart = next;
      startsInMs.push(Math.round((next - now) * 1000) / 1000); // to the µs, as the shared ledger says it
      next += spacing;
    }
    if (startsInMs.length > 0) return { kind: 'granted', startsInMs };
    if (this.#holds.size >= limits.maxConcurrent) return { kind: 'full', retryInMs: undefined };
    const oldest = this.#starts[0];
    const windowFree =
      this.#starts.length >= limits.maxPerSecond && oldest !== undefined ? oldest + RATE_WINDOW_MS : now;
    return { kind: 'full', retryInMs: Math.max(1, Math.ceil(Math.max(windowFree, next - RESERVE_AHEAD_MS) - now)) };
  }

  /** Counts a slot granted elsewhere (by the shared ledger), its start due at `startsAt`. */
  record(id: string, startsAt: number, now: number): void {
    this.#forget(now);
    this.#holds.set(id, { startedAt: startsAt, expiresAt: startsAt + this.#holdMs });
    if (startsAt > now - RATE_WINDOW_MS) this.#insertStart(startsAt);
    this.#lastStart = Math.max(this.#lastStart, startsAt);
  }

  release(id: string): void {
    this.#holds.delete(id);
  }

  /**
   * The slots held now, each with how long ago its start was due (negative: ahead), for
   * registering them elsewhere.
   */
  holds(now: number): Array<{ readonly id: string; readonly ageMs: number }> {
    this.#forget(now);
    return [...this.#holds].map(([id, hold]) => ({ id, ageMs: now - hold.startedAt }));
  }

  #insertStart(at: number): void {
    let i = this.#starts.length;
    while (i > 0 && (this.#starts[i - 1] ?? 0) > at) i -= 1;
    this.#starts.splice(i, 0, at);
  }

  #forget(now: number): void {
    while (this.#starts.length > 0 && (this.#starts[0] ?? 0) <= now - RATE_WINDOW_MS) this.#starts.shift();
    for (const [id, hold] of this.#holds) if (hold.expiresAt <= now) this.#holds.delete(id);
  }
}
