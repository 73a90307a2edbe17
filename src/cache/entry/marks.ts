/**
 * Invalidation marks (docs/cache.md#soft-invalidation). An invalidation does not delete: it sets
 * a new mark on what the change may have touched (the group's lists, and its records or all of
 * them), and an entry filled under other marks than its page's marks now is stale from the
 * moment the newest of them was set. A stale entry serves while one conditional refresh runs
 * (RFC 5861 §3), so an unchanged page costs a 304 and a changed one is replaced, with no miss.
 *
 * A mark is `<ms since the epoch, base 36>.<random>`: unguessable, like a purge generation, and
 * carrying when it was set. A mark key holds the last `HISTORY` marks set on it, newest first, so
 * that an entry filled under an older one is stale from the first mark set after its own (not from
 * the newest: a page changed twice since it was read misses the first change too). The entry
 * keeps the newest marks of its page (`headsOf`) as read *before* the upstream was asked: a fill in
 * flight across an invalidation is stamped with the older marks and is stale as soon as it is
 * stored, never fresh with what the upstream said before the change.
 *
 * A mark set on a group's lists by a change of named records carries their ids (`<mark>=<ids>`,
 * page-window.ts): a list page with a verified keyset window is stale only from the first mark
 * after its own whose ids its window can hold (docs/cache.md#window-marks). The lists key keeps a
 * longer history, so that a page no change has reached keeps its own mark in it while it lives.
 */
import type { CacheEntry } from './entry.js';
import { type ChangedIds, decodeChangedIds, reaches } from './page-window.js';

/** Marks a record's or a resource's mark key keeps, newest first. */
export const HISTORY = 8;
/** Marks the group's lists key keeps, newest first: each names the records it changed. */
export const LIST_HISTORY = 64;

/** A mark key's value with `mark` set on it: `mark` first, then the newest of those it held, `keep` in all. */
export function withMark(previous: string | null | undefined, mark: string, keep = HISTORY): string {
  if (previous === null || previous === undefined || previous === '') return mark;
  return [mark, ...previous.split(' ').slice(0, keep - 1)].join(' ');
}

/** A mark as a lists key holds it: the mark, and the records it changed when it names them. */
export function listsMark(mark: string, changedIds: string | undefined): string {
  return changedIds === undefined ? mark : `${mark}=${changedIds}`;
}

/** The records one entry of a lists key's history names (`<mark>=<ids>`); `undefined` when it names none. */
export function changedByMark(held: string): ChangedIds | undefined {
  const at = held.indexOf('=');
  return at === -1 ? undefined : decodeChangedIds(held.slice(at + 1));
}

/** The mark of one entry of a key's history, without the ids it names. */
function markOf(held: string): string {
  const at = held.indexOf('=');
  return at === -1 ? held : held.slice(0, at);
}

/** A new mark, set at `at` (ms since the epoch). */
export function newMark(at: number): string {
  return `${at.toString(36)}.${Math.random().toString(36).slice(2, 10)}`;
}

/**
 * A page's marks as one text, from the values of its mark keys in their order (`null` for a key
 * not set), each with its history: `''` when none is set.
 */
export function pageMark(values: ReadonlyArray<string | null | undefined>): string {
  let any = false;
  for (const value of values) if (value !== null && value !== undefined) any = true;
  return any ? values.map((value) => value ?? '').join('/') : '';
}

/** The newest mark of each of a page's mark keys (what an entry is stamped with): `''` when none is set. */
export function headsOf(pageMarks: string): string {
  if (pageMarks === '') return '';
  return pageMarks
    .split('/')
    .map((component) => markOf(component.split(' ', 1)[0] ?? ''))
    .join('/');
}

/** When one mark was set (ms since the epoch); `undefined` for what is not a mark. */
export function markedAt(mark: string): number | undefined {
  const dot = mark.indexOf('.');
  const at = dot > 0 ? Number.parseInt(mark.slice(0, dot), 36) : Number.NaN;
  return Number.isFinite(at) ? at : undefined;
}

/**
 * The marks set on a key after `mine` (the mark an entry holds for it), oldest first, from the
 * key's history; `undefined` when that is not known (`mine` older than the history, or the key's
 * marks lost).
 */
function setSince(history: readonly string[], mine: string): readonly string[] | undefined {
  const at = history.findIndex((held) => markOf(held) === mine);
  if (at >= 0) return history.slice(0, at).reverse();
  if (mine === '' && history.length < HISTORY) return [...history].reverse();
  return undefined;
}

/**
 * When the entry went stale by one mark key's `history`, given `own`, the mark it holds for it:
 * when the first mark after its own that can change it was set (`undefined`: none can), at once
 * (its `storedAt`) when that is not known.
 */
function staleFromKey(entry: CacheEntry, history: readonly string[], own: string): number | undefined {
  const since = setSince(history, own);
  if (since === undefined) return entry.storedAt;
  for (const held of since)
    if (reaches(entry.window, changedByMark(held))) return markedAt(markOf(held)) ?? entry.storedAt;
  return undefined;
}

/**
 * The entry as of its page's marks now: itself while it was filled under the newest, or while no
 * mark set since can change its page (its window: page-window.ts); else stale from when the first
 * mark after its own that can was set (never before it was stored; at once when that is unknown),
 * its stale windows counted from there and `invalidatedAt` set.
 */
export function asOfMarks(entry: CacheEntry, pageMarks: string | undefined): CacheEntry {
  const now = pageMarks ?? '';
  const mine = entry.mark ?? '';
  if (mine === headsOf(now)) return entry;
  // A replica of a release before window marks stamps its entries with the ids a lists mark names:
  // an entry is judged by its marks alone.
  const held = mine.split('/').map(markOf);
  let staleFrom = Number.POSITIVE_INFINITY;
  now.split('/').forEach((component, i) => {
    const history = component === '' ? [] : component.split(' ');
    const own = held[i] ?? '';
    if (markOf(history[0] ?? '') === own) return;
    staleFrom = Math.min(staleFrom, staleFromKey(entry, history, own) ?? Number.POSITIVE_INFINITY);
  });
  if (!Number.isFinite(staleFrom)) return entry;
  staleFrom = Math.max(entry.storedAt, staleFrom);
  return { ...entry, freshUntil: Math.min(entry.freshUntil, staleFrom), invalidatedAt: staleFrom };
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

  /** Sets `mark` on `key`, the newest of its history of `history` marks (`withMark`). */
  set(key: string, mark: string, keepMs = Number.POSITIVE_INFINITY, history = HISTORY): void {
    this.#marks.set(key, { value: withMark(this.get(key), mark, history), until: this.#now() + keepMs });
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
