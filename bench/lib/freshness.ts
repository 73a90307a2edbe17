/**
 * How stale an answer is, judged against the live sandbox's change log (docs/sandbox.md#live-mode):
 * the time since the oldest change it does not reflect was made, 0 when it reflects every change
 * made before it was served. A change to a record is reflected when the answer holds that record as
 * of the change or later (`updated_at`), or, for a record the answer does not hold, when the
 * record's latest state does not belong on the page (a status moved away from the page's filter;
 * a later move supersedes an earlier one).
 */

/** A change as `GET /__sandbox/changes` lists it (the fields judged here). */
export interface LoggedChange {
  readonly seq: number;
  readonly at: number;
  readonly company: string;
  readonly resource: string;
  readonly id: number;
  readonly after: Readonly<Record<string, unknown>>;
}

/** An answer as a reader got it: what it asked, when it had the answer, and the body. */
export interface Answered {
  readonly company: string;
  readonly resource: string;
  /** `list` with its filters and cursor, or one record by id. */
  readonly read:
    | { readonly kind: 'list'; readonly filters: ReadonlyArray<readonly [string, string]>; readonly afterId: number }
    | { readonly kind: 'record'; readonly id: number };
  readonly servedAt: number;
  readonly body: unknown;
}

interface PageRecord {
  readonly id: number;
  readonly updated_at?: unknown;
}

function recordsOf(body: unknown): { readonly records: readonly PageRecord[]; readonly hasMore: boolean } {
  if (typeof body !== 'object' || body === null || !('data' in body)) return { records: [], hasMore: false };
  const data = body.data;
  const hasMore =
    'meta' in body && typeof body.meta === 'object' && body.meta !== null && 'has_more' in body.meta
      ? body.meta.has_more === true
      : false;
  const list = Array.isArray(data) ? data : [data];
  return {
    records: list.filter(
      (r): r is PageRecord => typeof r === 'object' && r !== null && typeof (r as PageRecord).id === 'number',
    ),
    hasMore,
  };
}

/** Whether the record as changed belongs on the page (its filters, past its cursor, within its range). */
function belongs(answer: Answered, change: LoggedChange, lastId: number | undefined, hasMore: boolean): boolean {
  if (answer.read.kind === 'record') return change.id === answer.read.id;
  if (change.id <= answer.read.afterId || (hasMore && lastId !== undefined && change.id > lastId)) return false;
  return answer.read.filters.every(([name, value]) => String(change.after[name]) === value);
}

/**
 * Whether the page may show the record at all: its id in the page's keyset window, past its cursor
 * and, when it has more, not past its last record (docs/cache.md#window-marks; a record page: its own).
 */
function inRange(answer: Answered, id: number, lastId: number | undefined, hasMore: boolean): boolean {
  if (answer.read.kind === 'record') return id === answer.read.id;
  return id > answer.read.afterId && !(hasMore && lastId !== undefined && id > lastId);
}

/** Whether a change of record `id` could show on the answer's page, by its window alone (its filters aside). */
export function windowHolds(answer: Answered, id: number): boolean {
  const { records, hasMore } = recordsOf(answer.body);
  return inRange(answer, id, records.at(-1)?.id, hasMore);
}

/**
 * When the answer stopped being right about one record, given the record's changes made before it
 * was served (oldest first), or undefined while it is right. A record the answer holds is right
 * until the first change after the version held (`updated_at`). A record it does not hold is right
 * while the record does not belong on the page: wrong since the first of the trailing changes after
 * which it belongs (a record moved in, then out again, is right once more; moved out, then in, is
 * wrong since it came back).
 */
function wrongSince(
  answer: Answered,
  changes: readonly LoggedChange[],
  held: PageRecord | undefined,
  lastId: number | undefined,
  hasMore: boolean,
): number | undefined {
  if (held !== undefined) {
    const heldAt = String(held.updated_at ?? '');
    return changes.find((change) => String(change.after.updated_at ?? '') > heldAt)?.at;
  }
  let since: number | undefined;
  for (let i = changes.length - 1; i >= 0; i--) {
    const change = changes[i];
    if (change === undefined || !belongs(answer, change, lastId, hasMore)) break;
    since = change.at;
  }
  return since;
}

/** Ms since the oldest change made before the answer and not reflected in it; 0 when none. */
export function staleness(answer: Answered, changes: readonly LoggedChange[]): number {
  const { records, hasMore } = recordsOf(answer.body);
  const held = new Map(records.map((record) => [record.id, record]));
  const lastId = records.at(-1)?.id;
  const byRecord = new Map<number, LoggedChange[]>();
  for (const change of changes) {
    if (change.at > answer.servedAt || change.company !== answer.company || change.resource !== answer.resource)
      continue;
    if (!inRange(answer, change.id, lastId, hasMore)) continue;
    const list = byRecord.get(change.id) ?? [];
    list.push(change);
    byRecord.set(change.id, list);
  }
  let oldest: number | undefined;
  for (const [id, list] of byRecord) {
    const since = wrongSince(answer, list, held.get(id), lastId, hasMore);
    if (since !== undefined && (oldest === undefined || since < oldest)) oldest = since;
  }
  return oldest === undefined ? 0 : answer.servedAt - oldest;
}

/** The change log, read from the sandbox as it grows, by company and resource. */
export class ChangeFeed {
  readonly #fetchSince: (since: number) => Promise<readonly LoggedChange[]>;
  readonly #byCollection = new Map<string, LoggedChange[]>();
  /** The last change read: its place in the log and its time. */
  #lastSeq = 0;
  #lastAt = 0;

  /** `fetchSince(ms)`: the changes made after `ms` (`GET /__sandbox/changes?since=`). */
  constructor(fetchSince: (since: number) => Promise<readonly LoggedChange[]>) {
    this.#fetchSince = fetchSince;
  }

  /** Reads the changes made since the last read (from a millisecond before it: none is missed, none kept twice). */
  async update(): Promise<void> {
    const changes = await this.#fetchSince(Math.max(0, this.#lastAt - 1));
    for (const change of changes) {
      if (change.seq <= this.#lastSeq) continue;
      const key = `${change.company}\n${change.resource}`;
      let list = this.#byCollection.get(key);
      if (list === undefined) {
        list = [];
        this.#byCollection.set(key, list);
      }
      list.push(change);
      this.#lastSeq = change.seq;
      this.#lastAt = Math.max(this.#lastAt, change.at);
    }
  }

  /** The changes of one company's collection read so far. */
  of(company: string, resource: string): readonly LoggedChange[] {
    return this.#byCollection.get(`${company}\n${resource}`) ?? [];
  }
}
