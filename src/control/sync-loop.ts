/**
 * The checks of the shared state: one at a time, every `intervalMs` and whenever asked, and never
 * before the connection is up (its first check follows the start's wait for it). A check asked for
 * while one runs is one more round after it: the running one may have read before the change that
 * asked.
 */
export interface SyncLoopOptions {
  readonly intervalMs: number;
  /** The connection is up. */
  readonly ready: () => boolean;
  readonly onError: ((error: unknown) => void) | undefined;
}

export class SyncLoop {
  readonly #check: () => Promise<void>;
  readonly #ready: () => boolean;
  readonly #onError: ((error: unknown) => void) | undefined;
  readonly #timer: NodeJS.Timeout;
  /** A check is running (cleared the moment the last round ends: a request after that starts a new run). */
  #busy = false;
  /** What the requests made while busy wait for: the rounds, the one more they asked for included. */
  #running: Promise<void> | undefined;
  #again = false;

  constructor(check: () => Promise<void>, options: SyncLoopOptions) {
    this.#check = check;
    this.#ready = options.ready;
    this.#onError = options.onError;
    this.#timer = setInterval(() => void this.run(), options.intervalMs);
    this.#timer.unref();
  }

  /** Checks now, or once more after the running check; never rejects. */
  async run(): Promise<void> {
    if (!this.#ready()) return;
    if (this.#busy) {
      this.#again = true; // one more round after the running one: it may have read before this change
      return this.#running;
    }
    this.#busy = true;
    this.#running = this.#rounds();
    return this.#running;
  }

  close(): void {
    clearInterval(this.#timer);
  }

  async #rounds(): Promise<void> {
    try {
      do {
        this.#again = false;
        try {
          await this.#check();
        } catch (error) {
          this.#onError?.(error); // the last known state keeps applying
          this.#again = false;
        }
      } while (this.#again);
    } finally {
      // In the same step as the last look at `again`: no request falls between the two.
      this.#busy = false;
    }
  }
}
