/**
 * A fixed-window counter in this process: the limiter of a single replica, and every replica's
 * fallback share while Redis is unavailable (docs/limits.md#inbound-limits). Same window semantics as the shared
 * limiter (rate-limiter-flexible's Redis script): a window opens with a key's first request and
 * lasts `duration`. Synchronous, so the hit path stays synchronous; bounded in keys.
 */
export interface WindowCount {
  /** Points consumed in the current window, this request included. */
  readonly consumed: number;
  /** Milliseconds until the window resets. */
  readonly msBeforeNext: number;
}

/** A window, the object itself its identity: a queued reference to a renewed window is stale. */
interface Window {
  consumed: number;
  readonly resetAt: number;
}

/** A window in the order of opening, with the key it was opened for. */
interface Opened {
  readonly key: string;
  readonly window: Window;
}

/**
 * Windows are queued in the order they opened: every window lasts the same `duration`, so that is
 * also the order they end in, and the ended ones are always at the front. Each new window first
 * drops those, then, with the map still full of live windows, the oldest: each window is queued
 * and dropped once, constant time per window on average. The queue is an array read
 * from a moving head, not the Map's own order: a Map iterated from its start after deletions at
 * its front walks every deleted slot until V8 compacts the table, which made each new credential
 * cost in proportion to the credentials already forgotten.
 */
export class LocalWindowLimiter {
  readonly #durationMs: number;
  readonly #maxKeys: number;
  readonly #now: () => number;
  readonly #windows = new Map<string, Window>();
  #opened: Opened[] = [];
  #head = 0;

  constructor(durationSeconds: number, options: { maxKeys?: number; now?: () => number } = {}) {
    this.#durationMs = durationSeconds * 1000;
    this.#maxKeys = options.maxKeys ?? 100_000;
    this.#now = options.now ?? Date.now;
  }

  consume(key: string): WindowCount {
    const now = this.#now();
    let window = this.#windows.get(key);
    if (window === undefined || window.resetAt <= now) {
      // An ended window makes room for its own renewal, wherever the queue holds it (a clock that
      // stepped back can leave it behind a live one); its queue entry is then stale.
      if (window !== undefined) this.#windows.delete(key);
      this.#dropEnded(now);
      // Still full of live windows: forget the oldest, which only ever errs towards allowing.
      if (this.#windows.size >= this.#maxKeys) this.#dropOldest();
      window = { consumed: 0, resetAt: now + this.#durationMs };
      this.#windows.set(key, window);
      this.#opened.push({ key, window });
    }
    window.consumed += 1;
    return { consumed: window.consumed, msBeforeNext: window.resetAt - now };
  }

  /** Windows held (live, or ended and not yet dropped). */
  get size(): number {
    return this.#windows.size;
  }

  #dropEnded(now: number): void {
    for (let next = this.#peek(); next !== undefined && next.window.resetAt <= now; next = this.#peek())
      this.#dropHead();
  }

  #dropOldest(): void {
    if (this.#peek() !== undefined) this.#dropHead();
  }

  /** The oldest window still held; stale queue entries (renewed or dropped windows) are passed. */
  #peek(): Opened | undefined {
    while (this.#head < this.#opened.length) {
      const opened = this.#opened[this.#head] as Opened;
      if (this.#windows.get(opened.key) === opened.window) return opened;
      this.#head += 1;
    }
    return undefined;
  }

  #dropHead(): void {
    const opened = this.#opened[this.#head] as Opened;
    this.#windows.delete(opened.key);
    this.#head += 1;
    // The passed half of the queue is let go once it is the larger half.
    if (this.#head > 1024 && this.#head * 2 > this.#opened.length) {
      this.#opened = this.#opened.slice(this.#head);
      this.#head = 0;
    }
  }
}
