/**
 * A circuit breaker on repeated upstream failure (docs/limits.md#the-upstream-guard, after Envoy's outlier ejection):
 * `failures` failures in a row (refused, deadline, 5xx) open it for `openForMs`; meanwhile fetches
 * fail fast (the cache serves stale copies, others get 503). Then one half-open probe: success
 * closes it, failure opens it again. Per replica: each replica sees the upstream from where it is.
 */
export type BreakerState = 'closed' | 'open' | 'half-open';

export interface BreakerOptions {
  readonly failures: number;
  readonly openForMs: number;
  readonly now?: () => number;
  readonly onChange?: (state: BreakerState) => void;
}

export class CircuitBreaker {
  readonly #failures: number;
  readonly #openForMs: number;
  readonly #now: () => number;
  readonly #onChange: ((state: BreakerState) => void) | undefined;
  #state: BreakerState = 'closed';
  #consecutive = 0;
  #openUntil = 0;
  #probing = false;

  constructor(options: BreakerOptions) {
    if (!Number.isInteger(options.failures) || options.failures < 1)
      throw new TypeError('upstream.breaker.failures must be a positive integer');
    this.#failures = options.failures;
    this.#openForMs = options.openForMs;
    this.#now = options.now ?? Date.now;
    this.#onChange = options.onChange;
  }

  get state(): BreakerState {
    return this.#state;
  }

  /** Whether a fetch may go now; when not, how long until the breaker lets one probe through. */
  admit(): { readonly allowed: true } | { readonly allowed: false; readonly retryAfterMs: number } {
    if (this.#state === 'closed') return { allowed: true };
    const now = this.#now();
    if (this.#state === 'open' && now >= this.#openUntil) this.#set('half-open');
    if (this.#state === 'half-open' && !this.#probing) {
      this.#probing = true; // exactly one probe
      return { allowed: true };
    }
    return { allowed: false, retryAfterMs: Math.max(1_000, this.#openUntil - now) };
  }

  success(): void {
    this.#consecutive = 0;
    this.#probing = false;
    if (this.#state !== 'closed') this.#set('closed');
  }

  failure(): void {
    this.#consecutive += 1;
    const probeFailed = this.#state === 'half-open';
    this.#probing = false;
    if (probeFailed || this.#consecutive >= this.#failures) {
      this.#openUntil = this.#now() + this.#openForMs;
      this.#set('open');
    }
  }

  #set(state: BreakerState): void {
    this.#state = state;
    this.#onChange?.(state);
  }
}
