/**
 * Counts of the hot path (requests, L1 lookups) kept in plain numbers between scrapes, and handed
 * to their prom-client counter when it is scraped.
 */
import type { Counter } from 'prom-client';

/** A count kept with plain additions between scrapes. */
export interface PendingCount<L extends string> {
  readonly labels: Record<L, string>;
  pending: number;
}

/**
 * The hot path's counters: each label set's count is a plain number, handed to the prom-client
 * counter when it is scraped (its `collect`), so that no `inc()` hashes labels per request.
 */
export class PendingCounts<L extends string> {
  readonly #entries = new Map<string, PendingCount<L>>();

  /** The count for a label set, created once: the hot path keeps the reference. */
  entry(labels: Record<L, string>): PendingCount<L> {
    const key = JSON.stringify(labels);
    let entry = this.#entries.get(key);
    if (entry === undefined) {
      entry = { labels, pending: 0 };
      this.#entries.set(key, entry);
    }
    return entry;
  }

  flushInto(counter: Counter<L>): void {
    for (const entry of this.#entries.values()) {
      if (entry.pending === 0) continue;
      counter.inc(entry.labels, entry.pending);
      entry.pending = 0;
    }
  }
}
