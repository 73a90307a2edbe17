/**
 * The keyset window of a list page (docs/cache.md#window-marks). A list is read in keyset pages
 * (the seed, §4: `after_id` is the cursor, `meta.next_after_id` what the next page starts after):
 * a page with cursor A lists, of the records its filters select, the first `per_page` whose id is
 * above A, by ascending id. So a change to record X (an update, a creation, a removal, a move into
 * or out of the filters) can change that page only when X is above A and, if the page has more
 * after it, no higher than its last id L: **A < X and (X ≤ L or not has_more)**. A record above L
 * on a page that has more would come after it, on a later page; one at or below A, before it.
 *
 * The rule holds only for pages that list ascending ids with `next_after_id` their last id, which
 * is what the seed's examples show and not what it promises: each page is checked when it is
 * filled (`pageWindowOf`), and one that breaks it has no window, so that every change of its
 * group reaches it, as if windows did not exist. Pure.
 */
import type { PageParts } from '../../request/next-page.js';

/** What a list page covers: ids above `after`, up to `last` when it has `more` after it. */
export interface PageWindow {
  /** The cursor the page was read at (`after_id`), 0 without one. */
  readonly after: number;
  /** Its last record's id; `undefined` for an empty page. */
  readonly last: number | undefined;
  /** `meta.has_more`: a page after this one exists. */
  readonly more: boolean;
}

/**
 * The ids a change names, as an announcement and a mark carry them: each id when they are few, or
 * the range they span (which reaches more pages than the ids would, never fewer).
 */
export type ChangedIds =
  | { readonly kind: 'ids'; readonly ids: readonly number[] }
  | { readonly kind: 'range'; readonly low: number; readonly high: number };

/** Ids written one by one in a mark, at most; more are written as their range. */
export const MAX_LISTED_IDS = 16;

function isId(value: unknown): value is number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0;
}

/**
 * The window of a list page read at cursor `after`, when the page keeps the keyset rule: every
 * record has an id, the ids ascend strictly and are all above `after`, and a page with more after
 * it names its last id as `next_after_id`. `undefined` otherwise: its group's every change
 * reaches it.
 */
export function pageWindowOf(after: number, parts: PageParts | undefined): PageWindow | undefined {
  if (parts === undefined || !Array.isArray(parts.data)) return undefined;
  let previous = after;
  for (const record of parts.data as readonly unknown[]) {
    const id = typeof record === 'object' && record !== null ? (record as { readonly id?: unknown }).id : undefined;
    if (!isId(id) || id <= previous) return undefined;
    previous = id;
  }
  const more = parts.meta.has_more;
  if (typeof more !== 'boolean') return undefined;
  const last = parts.data.length === 0 ? undefined : previous;
  if (more && (last === undefined || parts.meta.next_after_id !== last)) return undefined;
  return { after, last, more };
}

/** Whether a change of the record `id` can change the page of `window` (the rule above). */
function holds(window: PageWindow, id: number): boolean {
  return id > window.after && (!window.more || (window.last !== undefined && id <= window.last));
}

/**
 * Whether a change naming `changed` can change the page of `window`: always when either is not
 * known (a change of the whole resource, a page that broke the keyset rule).
 */
export function reaches(window: PageWindow | undefined, changed: ChangedIds | undefined): boolean {
  if (window === undefined || changed === undefined) return true;
  if (changed.kind === 'ids') return changed.ids.some((id) => holds(window, id));
  // Some id of [low, high] above `after`, and (no more after it, or the lowest such id ≤ last).
  const lowest = Math.max(changed.low, window.after + 1);
  return lowest <= changed.high && (!window.more || (window.last !== undefined && lowest <= window.last));
}

/**
 * The changed ids as a mark carries them (`1,5,9`, or `3-900` past `MAX_LISTED_IDS`), or
 * `undefined` when one of them is not a record id a window can hold: the change then reaches
 * every list page of its group.
 */
export function encodeChangedIds(ids: readonly string[]): string | undefined {
  if (ids.length === 0) return undefined;
  const numbers: number[] = [];
  for (const id of ids) {
    if (!/^[0-9]{1,15}$/.test(id)) return undefined;
    numbers.push(Number(id));
  }
  const sorted = [...new Set(numbers)].sort((a, b) => a - b);
  if (sorted.length <= MAX_LISTED_IDS) return sorted.join(',');
  return `${String(sorted[0])}-${String(sorted.at(-1))}`;
}

/** The ids `encodeChangedIds` wrote; `undefined` for any other text (the change then reaches every page). */
export function decodeChangedIds(text: string): ChangedIds | undefined {
  const range = /^([0-9]{1,15})-([0-9]{1,15})$/.exec(text);
  if (range !== null) {
    const low = Number(range[1]);
    const high = Number(range[2]);
    return low <= high ? { kind: 'range', low, high } : undefined;
  }
  if (!/^[0-9]{1,15}(,[0-9]{1,15})*$/.test(text)) return undefined;
  return { kind: 'ids', ids: text.split(',').map(Number) };
}
