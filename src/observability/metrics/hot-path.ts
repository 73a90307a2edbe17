/**
 * The series recorded on every request, counted in plain numbers and handed to prom-client when
 * scraped: the requests, their durations and the L1 lookups. prom-client hashes and validates the
 * label object on every `inc()` and `observe()`; here a request finds its series in three lookups
 * of keys that exist already, and adds (see metrics.ts for the cost).
 */
import { L1_LOOKUPS, REQUEST_SECONDS, REQUESTS } from './definitions.js';
import { isStatusCode, resourceLabel, statusLabel } from './labels.js';
import { type PendingCount, PendingCounts } from './pending-counts.js';
import type { HistogramSeries, RecordedHistogram } from './recorded-histogram.js';
import type { MetricRegistry } from './registry.js';

type RequestLabel = (typeof REQUESTS.labelNames)[number];

/** A request label set's count and duration series, and its count since the start. */
interface RequestEntry {
  readonly count: PendingCount<RequestLabel>;
  readonly seconds: HistogramSeries;
  total: number;
}

/** The cache labels of reads answered from the cache or for it (not `bypass`, not `none`). */
const READ_RESULTS = ['hit', 'stale', 'miss', 'collapsed'];

/** `slab_proxy_requests_total` and `slab_proxy_request_duration_seconds`. */
export class RequestSeries {
  readonly #counts = new PendingCounts<RequestLabel>();
  readonly #seconds: RecordedHistogram;
  /**
   * Each request label set's entry, by resource label, then cache label, then status (bounded: at
   * most 14 resources × 6 results × 501 statuses). Three lookups of keys that exist already: a
   * request adds to counts and makes no string or object.
   */
  readonly #entries = new Map<string, Map<string, Map<number, RequestEntry>>>();

  constructor(registry: MetricRegistry) {
    const counts = this.#counts;
    registry.counter(REQUESTS, (counter) => counts.flushInto(counter));
    this.#seconds = registry.recordedHistogram(REQUEST_SECONDS);
  }

  /** `cache` absent: not a read. */
  record(resource: string | undefined, status: number, cache: string | undefined, seconds: number): void {
    const entry = this.#entry(resourceLabel(resource), cache ?? 'none', status);
    entry.count.pending += 1;
    entry.total += 1;
    this.#seconds.record(entry.seconds, seconds);
  }

  /** A resource's reads answered since the start, whatever their status (the freshness advice's). */
  readsOf(resource: string): number {
    const byCache = this.#entries.get(resourceLabel(resource));
    let reads = 0;
    for (const result of READ_RESULTS) for (const entry of byCache?.get(result)?.values() ?? []) reads += entry.total;
    return reads;
  }

  #entry(resource: string, cache: string, status: number): RequestEntry {
    let byCache = this.#entries.get(resource);
    if (byCache === undefined) {
      byCache = new Map();
      this.#entries.set(resource, byCache);
    }
    let byStatus = byCache.get(cache);
    if (byStatus === undefined) {
      byStatus = new Map();
      byCache.set(cache, byStatus);
    }
    // Statuses outside 100–599 share the `other` label, and one entry (key 0).
    const statusKey = isStatusCode(status) ? status : 0;
    let entry = byStatus.get(statusKey);
    if (entry === undefined) {
      const labels = { resource, status: statusLabel(status), cache };
      entry = { count: this.#counts.entry(labels), seconds: this.#seconds.series({ cache }), total: 0 };
      byStatus.set(statusKey, entry);
    }
    return entry;
  }
}

/** `slab_proxy_l1_lookups_total`: a hit or a miss is one addition. */
export class L1Lookups {
  readonly #hit: PendingCount<'result'>;
  readonly #miss: PendingCount<'result'>;

  constructor(registry: MetricRegistry) {
    const counts = new PendingCounts<'result'>();
    registry.counter(L1_LOOKUPS, (counter) => counts.flushInto(counter));
    this.#hit = counts.entry({ result: 'hit' });
    this.#miss = counts.entry({ result: 'miss' });
  }

  record(hit: boolean): void {
    (hit ? this.#hit : this.#miss).pending += 1;
  }
}
