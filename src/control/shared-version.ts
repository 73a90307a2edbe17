/**
 * Which state in Redis this replica's copy last matched (its incarnation and `rev`), and when the
 * copy was last confirmed against Redis: by a check, or by an announced change applied in order.
 * Comparing Redis's meta with it tells a check whether to read, and whether Redis lost changes.
 */
import type { StateMeta } from './control-store.js';

export class SharedVersion {
  /** Redis's incarnation and rev as this copy last matched them. */
  #known: StateMeta | undefined;
  #confirmedAt: number | undefined;
  readonly #startedAt: number;
  /**
   * Redis was seen behind this copy with the same incarnation and a `rev` this copy had passed: a
   * failover to a replica that lagged, whose `rev` then counted the same numbers again for other
   * changes. Numbers no longer tell what Redis holds until the copy is matched again.
   */
  #behind = false;

  constructor(startedAt: number) {
    this.#startedAt = startedAt;
  }

  /** Redis shows another state than the one last matched, or none was matched yet. */
  differs(meta: StateMeta): boolean {
    const known = this.#known;
    return known === undefined || meta.rev !== known.rev || meta.incarnation !== known.incarnation;
  }

  /** Another incarnation, or fewer changes than this copy has seen: Redis lost some of them. */
  lost(meta: StateMeta): boolean {
    const known = this.#known;
    return known !== undefined && (this.#behind || meta.incarnation !== known.incarnation || meta.rev < known.rev);
  }

  /** Redis counted a change with a `rev` this copy had already passed (see `#behind`). */
  sawRedisBehind(): void {
    this.#behind = true;
  }

  /** The highest `rev` this copy has matched: a write-back after a loss moves Redis's past it. */
  get knownRev(): number {
    return this.#known?.rev ?? 0;
  }

  /** The change is already applied here (this replica's own change, or read). */
  has(incarnation: string, rev: number): boolean {
    return this.#known !== undefined && incarnation === this.#known.incarnation && rev <= this.#known.rev;
  }

  /** The change is the one right after the state last matched. */
  isNext(incarnation: string, rev: number): boolean {
    return this.#known !== undefined && incarnation === this.#known.incarnation && rev === this.#known.rev + 1;
  }

  /** Steps over that next change; false, and nothing done, for any other. */
  advance(incarnation: string, rev: number): boolean {
    if (this.#known === undefined || !this.isNext(incarnation, rev)) return false;
    this.#known = { ...this.#known, rev };
    return true;
  }

  /** The copy now holds everything of this state (it was just read). */
  matched(meta: StateMeta): void {
    this.#known = meta;
    this.#behind = false;
  }

  /** The copy was confirmed against Redis at `at`. */
  touch(at: number): void {
    this.#confirmedAt = at;
  }

  /** Since the copy was last confirmed against Redis (since the start, if never), ms. */
  ageMs(now: number): number {
    return now - (this.#confirmedAt ?? this.#startedAt);
  }
}
