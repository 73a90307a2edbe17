/**
 * This replica's copy of the operator state, and who hears when its TTL overrides or its company
 * weights change. Every change of the copy goes through here (a change made here, one from another
 * replica, a read, an expiry), so that no listener misses one.
 */
import {
  type CompanyWeights,
  OperatorState,
  type StateEntry,
  TOMBSTONE_RETENTION_MS,
  type TtlOverrides,
} from './operator-state.js';

/** What the listeners are told of: each a new object after a change. */
interface Watched {
  readonly overrides: TtlOverrides;
  readonly weights: CompanyWeights;
}

export class LocalCopy {
  /** What the hit path reads (access lists, overrides). */
  readonly state = new OperatorState();
  readonly #overridesListeners: Array<(overrides: TtlOverrides) => void> = [];
  readonly #weightsListeners: Array<(weights: CompanyWeights) => void> = [];

  onOverridesChange(listener: (overrides: TtlOverrides) => void): void {
    this.#overridesListeners.push(listener);
  }

  onWeightsChange(listener: (weights: CompanyWeights) => void): void {
    this.#weightsListeners.push(listener);
  }

  /** Whether the entry would change this copy: none here for the field, or an earlier stamp. */
  isNews(field: string, entry: StateEntry): boolean {
    const held = this.state.get(field);
    return held === undefined || held.t < entry.t;
  }

  /** Merges entries in: per entry, the later stamp wins. */
  apply(entries: Iterable<[string, StateEntry]>): void {
    const before = this.#watched();
    for (const [field, entry] of entries) this.state.apply(field, entry);
    this.#notifyOfChanges(before);
  }

  /**
   * Applies a change made here, stamped on this clock (`at`). Its expiry is decided here, once: the
   * token's `exp` for a revocation, the retention for a deletion (a tombstone), none for the rest.
   */
  change(field: string, value: StateEntry['v'], expiresAt: number | null, at: number): StateEntry {
    const previous = this.state.get(field);
    const local: StateEntry = {
      // Later than the entry it replaces even if this clock is behind the one that stamped it.
      t: Math.max(at, (previous?.t ?? 0) + 1),
      v: value,
      x: value === null ? at + TOMBSTONE_RETENTION_MS : expiresAt,
    };
    this.apply([[field, local]]);
    return local;
  }

  /** The same change, stamped by Redis instead of this clock: the value is unchanged, nobody is told. */
  restamp(field: string, entry: StateEntry): void {
    this.state.replace(field, entry);
  }

  /** Drops the entries that expired by `nowMs`. */
  prune(nowMs: number): void {
    const before = this.#watched();
    this.state.prune(nowMs);
    this.#notifyOfChanges(before);
  }

  #watched(): Watched {
    return { overrides: this.state.overrides(), weights: this.state.weights() };
  }

  #notifyOfChanges(before: Watched): void {
    const after = this.#watched();
    if (after.overrides !== before.overrides)
      for (const listener of this.#overridesListeners) listener(after.overrides);
    if (after.weights !== before.weights) for (const listener of this.#weightsListeners) listener(after.weights);
  }
}
