/**
 * This replica's copy of the operator state, and who hears when its TTL overrides change. Every
 * change of the copy goes through here (a change made here, one from another replica, a read, an
 * expiry), so that no listener misses one.
 */
import { OperatorState, type StateEntry, TOMBSTONE_RETENTION_MS, type TtlOverrides } from './operator-state.js';

export class LocalCopy {
  /** What the hit path reads (access lists, overrides). */
  readonly state = new OperatorState();
  readonly #listeners: Array<(overrides: TtlOverrides) => void> = [];

  onOverridesChange(listener: (overrides: TtlOverrides) => void): void {
    this.#listeners.push(listener);
  }

  /** Whether the entry would change this copy: none here for the field, or an earlier stamp. */
  isNews(field: string, entry: StateEntry): boolean {
    const held = this.state.get(field);
    return held === undefined || held.t < entry.t;
  }

  /** Merges entries in: per entry, the later stamp wins. */
  apply(entries: Iterable<[string, StateEntry]>): void {
    const before = this.state.overrides();
    for (const [field, entry] of entries) this.state.apply(field, entry);
    this.#notifyIfOverridesChanged(before);
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
    const before = this.state.overrides();
    this.state.prune(nowMs);
    this.#notifyIfOverridesChanged(before);
  }

  #notifyIfOverridesChanged(before: TtlOverrides): void {
    const after = this.state.overrides();
    if (after !== before) for (const listener of this.#listeners) listener(after);
  }
}
