/**
 * Whether this replica has read a settled operator state since it started, and the
 * promise the start waits on. A state counts as settled once its incarnation is at least `settleMs`
 * old: every other live replica has had the time to merge its knowledge into it (operator-control.ts).
 * Once confirmed, always: a replica cut off from Redis later keeps applying what it read.
 */
export class Confirmation {
  readonly #settleMs: number;
  #confirmed = false;
  #resolve: () => void = () => undefined;
  /** Resolves once confirmed (never, if it never is). */
  readonly promise: Promise<void>;

  constructor(settleMs: number) {
    this.#settleMs = settleMs;
    this.promise = new Promise<void>((resolve) => {
      this.#resolve = resolve;
    });
  }

  /** Confirmed from the start: the state is this replica's alone (no Redis). */
  static notShared(): Confirmation {
    const confirmation = new Confirmation(0);
    confirmation.#confirm();
    return confirmation;
  }

  get confirmed(): boolean {
    return this.#confirmed;
  }

  /** The state was read from Redis, its incarnation `ageMs` old. */
  read(ageMs: number): void {
    if (!this.#confirmed && ageMs >= this.#settleMs) this.#confirm();
  }

  #confirm(): void {
    this.#confirmed = true;
    this.#resolve();
  }
}
