/**
 * Which ledger an upstream budget takes its slots from, decided from what this replica has heard
 * from the shared ledger (docs/architecture.md#the-upstream-budget):
 *
 * - `shared`: the shared ledger answered last, this replica has registered in its epoch, and its
 *   grants are open. Slots come from Redis, for every replica together.
 * - `cut-off`: the shared ledger did not answer, or has not yet; slots granted by it before may
 *   still be held anywhere, so none is taken from anywhere. Not for longer than `fallbackAfterMs`
 *   (0 with `upstream.budgetCutOff: share`, the default: straight to `local`).
 * - `local`: the shared ledger has not answered for `fallbackAfterMs`: every slot it granted before
 *   has been released or has expired, and this replica keeps to its share. Once it took a slot
 *   from its share, it stays on it until the shared ledger answers a rejoin: its slots registered
 *   there, grants closed for every replica until all have had the time to do the same.
 * - `rejoining`: back from its share, its slots registered, grants closed for every replica until
 *   the others on their shares have rejoined too. It keeps to its share meanwhile, and registers
 *   each slot it takes before using it, so that the shared ledger counts it when grants open.
 * - `closed`: the shared ledger answered but grants have not opened yet (a new epoch, another
 *   replica's rejoin); this replica was not on its share, so it takes nothing meanwhile: slots it or
 *   others took from the shared ledger before may not all be registered yet. Its requests wait for
 *   the opening, which comes early once the ledger has heard every replica (the quorum:
 *   src/upstream-guard/shared-ledger.ts).
 */
export type BudgetMode = 'shared' | 'closed' | 'rejoining' | 'cut-off' | 'local';

export const BUDGET_MODES: readonly BudgetMode[] = ['shared', 'closed', 'rejoining', 'cut-off', 'local'];

export class BudgetContact {
  readonly #fallbackAfterMs: number;
  /** Last answer from the shared ledger (or the start), on this replica's clock. */
  #lastAnswerAt: number;
  #failing = false;
  /** The epoch this replica has registered its slots in. */
  #epoch: string | undefined;
  /** When grants open, on this replica's clock. */
  #openAt = 0;
  /** On its local share: left by a rejoin, or by any answer if it took no slot from the share. */
  #local = false;
  /** It took slots from its share since it turned to it: those must be registered on its return. */
  #tookShare = false;
  /** Its last registration was a rejoin: until grants open, it keeps to its share. */
  #rejoined = false;

  constructor(fallbackAfterMs: number, startedAt: number) {
    this.#fallbackAfterMs = fallbackAfterMs;
    this.#lastAnswerAt = startedAt;
  }

  get epoch(): string | undefined {
    return this.#epoch;
  }

  /** Whether the next answer must be a rejoin (this replica took slots from its local share). */
  get rejoining(): boolean {
    return this.#local && this.#tookShare;
  }

  mode(now: number): BudgetMode {
    if (this.#local) return 'local';
    if (this.#failing || this.#epoch === undefined) {
      if (now - this.#lastAnswerAt < this.#fallbackAfterMs) return 'cut-off';
      this.#local = true;
      return 'local';
    }
    if (now < this.#openAt) return this.#rejoined ? 'rejoining' : 'closed';
    return 'shared';
  }

  /** When a `cut-off` replica turns to its local share (on its clock). */
  get fallbackAt(): number {
    return this.#lastAnswerAt + this.#fallbackAfterMs;
  }

  /** When grants open (on its clock). */
  get openAt(): number {
    return this.#openAt;
  }

  /** The shared ledger answered at `now`: grants open `openInMs` from now. */
  answered(now: number, openInMs: number): void {
    this.#lastAnswerAt = now;
    this.#failing = false;
    this.#openAt = now + Math.max(0, openInMs);
    // Nothing taken from the share meanwhile: nothing to register, no rejoin to close grants for.
    if (this.#local && !this.#tookShare && this.#epoch !== undefined) this.#local = false;
  }

  /** This replica's slots are registered in `epoch`; `rejoin`: back from its share. */
  registered(epoch: string, rejoin: boolean): void {
    this.#epoch = epoch;
    this.#local = false;
    this.#tookShare = false;
    this.#rejoined = rejoin;
  }

  /** A slot was taken from this replica's share. */
  tookShare(): void {
    this.#tookShare = true;
  }

  failed(): void {
    this.#failing = true;
  }
}
