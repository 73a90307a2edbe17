/**
 * What changed in the live sandbox, and when (docs/sandbox.md#live-mode): every change with its
 * time, its company, resource and record, and the record before and after it, so that a reader can
 * tell whether an answer it got reflected every change made before a given time. It also gives
 * each page its `Last-Modified`: the time of the latest change that touched what the page shows.
 */
import type { SandboxRecord } from './dataset.js';
import type { ChangeKind } from './live-rules.js';
import type { ListQuery } from './query.js';
import type { ResourceName } from './resources.js';

export interface Change {
  /** Its place in the log, from 1. */
  readonly seq: number;
  /** Ms since the epoch. */
  readonly at: number;
  readonly company: string;
  readonly resource: ResourceName;
  readonly id: number;
  readonly kind: ChangeKind;
  /** The record before the change (`null`: appended) and after it. */
  readonly before: SandboxRecord | null;
  readonly after: SandboxRecord;
}

/** Changes kept per company and resource; older ones are forgotten (and pages count as changed then). */
const KEPT_PER_COLLECTION = 10_000;

function matches(record: SandboxRecord | null, filters: ListQuery['filters']): boolean {
  return record !== null && filters.every(([name, value]) => String(record[name]) === value);
}

/** The changes of one company's collection, and until when older ones were forgotten. */
interface Collection {
  readonly changes: Change[];
  forgottenUntil: number;
}

export class ChangeLog {
  #seq = 0;
  readonly #collections = new Map<string, Collection>();

  /** Records a change; returns it with its place in the log. */
  add(change: Omit<Change, 'seq'>): Change {
    this.#seq += 1;
    const logged: Change = { seq: this.#seq, ...change };
    const collection = this.#collection(change.company, change.resource);
    collection.changes.push(logged);
    if (collection.changes.length > KEPT_PER_COLLECTION) {
      const forgotten = collection.changes.shift();
      if (forgotten !== undefined) collection.forgottenUntil = forgotten.at;
    }
    return logged;
  }

  get size(): number {
    return this.#seq;
  }

  /** The changes after `since` (ms), oldest first, of a company and a resource when given; at most `limit`. */
  list(filter: { since: number; company?: string; resource?: string; limit: number }): Change[] {
    const out: Change[] = [];
    for (const collection of this.#collections.values())
      for (const change of collection.changes) {
        if (change.at <= filter.since) continue;
        if (filter.company !== undefined && change.company !== filter.company) continue;
        if (filter.resource !== undefined && change.resource !== filter.resource) continue;
        out.push(change);
      }
    return out.sort((a, b) => a.seq - b.seq).slice(0, filter.limit);
  }

  /**
   * When what a list page shows last changed: the latest change of a record that matches the
   * page's filters before or after it, past its cursor and, when the page has more, not past its
   * last record (a record leaving or joining the range shifts every record after it).
   */
  listChangedAt(
    company: string,
    resource: ResourceName,
    query: ListQuery,
    lastId: number | undefined,
    hasMore: boolean,
  ): number | undefined {
    const collection = this.#collections.get(`${company}\n${resource}`);
    if (collection === undefined) return undefined;
    let latest = collection.forgottenUntil > 0 ? collection.forgottenUntil : undefined;
    for (const change of collection.changes) {
      if (change.id <= query.afterId || (hasMore && lastId !== undefined && change.id > lastId)) continue;
      if (!matches(change.before, query.filters) && !matches(change.after, query.filters)) continue;
      if (latest === undefined || change.at > latest) latest = change.at;
    }
    return latest;
  }

  /** When a record last changed. */
  recordChangedAt(company: string, resource: ResourceName, id: number): number | undefined {
    const collection = this.#collections.get(`${company}\n${resource}`);
    if (collection === undefined) return undefined;
    let latest = collection.forgottenUntil > 0 ? collection.forgottenUntil : undefined;
    for (const change of collection.changes)
      if (change.id === id && (latest === undefined || change.at > latest)) latest = change.at;
    return latest;
  }

  #collection(company: string, resource: ResourceName): Collection {
    const key = `${company}\n${resource}`;
    let collection = this.#collections.get(key);
    if (collection === undefined) {
      collection = { changes: [], forgottenUntil: 0 };
      this.#collections.set(key, collection);
    }
    return collection;
  }
}
