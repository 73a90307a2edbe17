/**
 * The sandbox's rate limit (docs/sandbox.md): API requests beyond this many within one wall-clock
 * second are answered 429 (fixed one-second windows). Set at creation and by
 * `PUT /__sandbox/rate-limit`.
 */

export class RateLimitSwitch {
  #perSecond: number;

  /** `perSecond` 0 turns the limit off. */
  constructor(perSecond: number) {
    this.#perSecond = perSecond;
  }

  set(perSecond: number): void {
    this.#perSecond = perSecond;
  }

  /** Whether a request that is the `startsThisSecond`-th of its second is over the limit. */
  refuses(startsThisSecond: number): boolean {
    return this.#perSecond > 0 && startsThisSecond > this.#perSecond;
  }
}
