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

/**
 * Windows are kept in the order they opened: every window lasts the same `duration`, so that is
 * also the order they end in, and the expired ones are always at the front. Each new window first
 * drops those (each window is dropped once: constant time per window on average, issue 17: a scan
 * of every window per new key made a crowd of new credentials quadratic), then, with the map still
 * full of live windows, the oldest.
 */
export class LocalWindowLimiter {
  readonly #durationMs: number;
  readonly #maxKeys: number;
  readonly #now: () => number;
  readonly #windows = new Map<string, { consumed: number; readonly resetAt: number }>();

  constructor(durationSeconds: number, options: { maxKeys?: number; now?: () => number } = {}) {
    this.#durationMs = durationSeconds * 1000;
    this.#maxKeys = options.maxKeys ?? 100_000;
    this.#now = options.now ?? Date.now;
  }

  consume(key: string): WindowCount {
    const now = this.#now();
    let window = this.#windows.get(key);
    if (window === undefined || window.resetAt <= now) {
      // A renewed window moves to the back, where the order of ending puts it.
      if (window !== undefined) this.#windows.delete(key);
      this.#dropExpired(now);
      // Still full of live windows: forget the oldest, which only ever errs towards allowing.
      if (this.#windows.size >= this.#maxKeys) this.#dropOldest();
      window = { consumed: 0, resetAt: now + this.#durationMs };
      this.#windows.set(key, window);
    }
    window.consumed += 1;
    return { consumed: window.consumed, msBeforeNext: window.resetAt - now };
  }

  /** Windows held (live, or ended and not yet dropped). */
  get size(): number {
    return this.#windows.size;
  }

  #dropExpired(now: number): void {
    for (const [key, window] of this.#windows) {
      if (window.resetAt > now) return;
      this.#windows.delete(key);
    }
  }

  #dropOldest(): void {
    const oldest = this.#windows.keys().next();
    if (oldest.done !== true) this.#windows.delete(oldest.value);
  }
}
