/**
 * Invalidation marks (docs/cache.md#soft-invalidation). An invalidation does not delete: it sets
 * a new mark on what the change may have touched (the group's lists, and its records or all of
 * them), and an entry filled under other marks than its page's marks now is stale from the
 * moment the newest of them was set. A stale entry serves while one conditional refresh runs
 * (RFC 5861 §3), so an unchanged page costs a 304 and a changed one is replaced, with no miss.
 *
 * A mark is `<ms since the epoch, base 36>.<random>`: unguessable, like a purge generation, and
 * carrying when it was set. The entry keeps the marks it was filled under, read *before* the
 * upstream was asked: a fill in flight across an invalidation is stamped with the older marks and
 * is stale as soon as it is stored, never fresh with what the upstream said before the change.
 */
import type { CacheEntry } from './entry.js';

/** A new mark, set at `at` (ms since the epoch). */
export function newMark(at: number): string {
  return `${at.toString(36)}.${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * A page's marks as one text, from the values of its mark keys in their order (`null` for a key
 * not set): `''` when none is set, so that an entry filled before any invalidation stores none.
 */
export function pageMark(values: ReadonlyArray<string | null | undefined>): string {
  let any = false;
  for (const value of values) if (value !== null && value !== undefined) any = true;
  return any ? values.map((value) => value ?? '').join('/') : '';
}

/** When the newest of a page's marks was set (ms since the epoch); `undefined` for none. */
export function markedAt(mark: string): number | undefined {
  let newest: number | undefined;
  for (const part of mark.split('/')) {
    const dot = part.indexOf('.');
    const at = dot > 0 ? Number.parseInt(part.slice(0, dot), 36) : Number.NaN;
    if (Number.isFinite(at) && (newest === undefined || at > newest)) newest = at;
  }
  return newest;
}

/**
 * The entry as of its page's marks now: itself while it was filled under them; else stale from
 * when the newest mark was set (never before it was stored; at once when that is unknown, as for a
 * mark that was lost), its stale windows counted from there.
 */
export function asOfMarks(entry: CacheEntry, mark: string | undefined): CacheEntry {
  const now = mark ?? '';
  if ((entry.mark ?? '') === now) return entry;
  const staleFrom = Math.max(entry.storedAt, markedAt(now) ?? entry.storedAt);
  return staleFrom >= entry.freshUntil ? entry : { ...entry, freshUntil: staleFrom };
}

/**
 * The marks of an in-process store: values by mark key, each kept until its own expiry (`Infinity`
 * for the marks of a group, which are one per company and resource).
 */
export class MarkTable {
  readonly #marks = new Map<string, { readonly value: string; readonly until: number }>();
  readonly #now: () => number;
  /** The table's size after its last pruning: it is pruned again once it has doubled. */
  #prunedSize = 0;

  constructor(now: () => number) {
    this.#now = now;
  }

  get(key: string): string | undefined {
    const held = this.#marks.get(key);
    if (held === undefined) return undefined;
    if (held.until > this.#now()) return held.value;
    this.#marks.delete(key);
    return undefined;
  }

  set(key: string, value: string, keepMs = Number.POSITIVE_INFINITY): void {
    this.#marks.set(key, { value, until: this.#now() + keepMs });
  }

  /** The page mark of an address's mark keys (`pageMark`). */
  pageMark(keys: readonly string[]): string {
    return pageMark(keys.map((key) => this.get(key)));
  }

  /**
   * Marks past their expiry dropped, once the table has doubled since the last time (called at
   * each invalidation): it stays within twice the live marks, at a constant cost per mark set.
   */
  prune(): void {
    if (this.#marks.size < 2 * this.#prunedSize + 64) return;
    const at = this.#now();
    for (const [key, held] of this.#marks) if (held.until <= at) this.#marks.delete(key);
    this.#prunedSize = this.#marks.size;
  }
}
