/**
 * The changes made on this replica that Redis does not have yet, by field: the entry to write is
 * the one the state holds. A change Redis could not take stays here until a check that reaches
 * Redis writes it (operator-control.ts).
 */
import type { OperatorState, StateEntry } from './operator-state.js';

export class PendingChanges {
  readonly #fields = new Set<string>();
  readonly #state: OperatorState;

  constructor(state: OperatorState) {
    this.#state = state;
  }

  get size(): number {
    return this.#fields.size;
  }

  has(field: string): boolean {
    return this.#fields.has(field);
  }

  add(field: string): void {
    this.#fields.add(field);
  }

  /**
   * Redis took `entry` for `field`: no longer pending, unless the field changed here since. That
   * later change has not reached Redis (it may never), so the field stays.
   */
  taken(field: string, entry: StateEntry): void {
    if (this.#fields.has(field) && this.#state.get(field) === entry) this.#fields.delete(field);
  }

  /** What is left to write, each field with the entry held here. */
  entries(): Array<[string, StateEntry]> {
    const pending: Array<[string, StateEntry]> = [];
    for (const field of this.#fields) {
      const entry = this.#state.get(field);
      // Expired here since (pruned): nothing is left to write, and Redis drops it by the same rule.
      if (entry === undefined) this.#fields.delete(field);
      else pending.push([field, entry]);
    }
    return pending;
  }
}
