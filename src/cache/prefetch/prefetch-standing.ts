/**
 * A prefetch's standing at the upstream (docs/cache.md#prefetch): spare — it takes only a
 * slot no request wants, and gives up rather than queue — until a client's request joins its fill
 * in this process. From then on it is that request's fetch: it waits for a slot as a request does
 * (src/upstream-guard/slot-waiters.ts), and a refusal is that request's refusal.
 */
export class PrefetchStanding {
  #joined = false;
  #listeners: Array<() => void> = [];

  /** Still a prefetch no client waits on. */
  get spare(): boolean {
    return !this.#joined;
  }

  /** A client's request joined the fill: the listeners are told, once. */
  join(): void {
    if (this.#joined) return;
    this.#joined = true;
    const listeners = this.#listeners;
    this.#listeners = [];
    for (const listener of listeners) listener();
  }

  /** `listener` runs when a client's request joins (at once if one has). */
  whenJoined(listener: () => void): void {
    if (this.#joined) listener();
    else this.#listeners.push(listener);
  }
}
