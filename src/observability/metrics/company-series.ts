/**
 * The per-company series (docs/operations.md#per-company-figures), bounded: the companies with the
 * most requests when a scrape finds a name free are named, `NAMED_COMPANIES` at most, for the life
 * of the process; everything else is counted under `company="other"`. A company once named keeps
 * its label, so that every series only grows (a counter that moved between labels would read to
 * Prometheus as a reset). What each company had counted before it was named stays in `other`.
 * The admin API's `/admin/companies` ranks every company, at any moment.
 */
import { COMPANY_CACHE_RESULTS, type CompanyCounts, type CompanyUsage } from '../company-usage.js';
import { COMPANY_REQUESTS, COMPANY_SLOT_WAIT, COMPANY_SLOTS, NAMED_COMPANIES, OTHER_COMPANIES } from './definitions.js';
import { type PendingCount, PendingCounts } from './pending-counts.js';
import type { MetricRegistry } from './registry.js';

/** A label's pending counts, in the order of a company's counts. */
interface LabelCounts {
  readonly requests: readonly PendingCount<'company' | 'cache'>[];
  readonly granted: PendingCount<'company' | 'result'>;
  readonly refused: PendingCount<'company' | 'result'>;
  readonly waited: PendingCount<'company'>;
}

/** What has been handed to the counters of one company's counts. */
interface Exported {
  readonly requests: number[];
  granted: number;
  refused: number;
  waitedMs: number;
}

export class CompanySeries {
  readonly #usage: CompanyUsage;
  readonly #requests = new PendingCounts<'company' | 'cache'>();
  readonly #slots = new PendingCounts<'company' | 'result'>();
  readonly #waited = new PendingCounts<'company'>();
  readonly #labels = new Map<string, LabelCounts>();
  readonly #exported = new Map<CompanyCounts, Exported>();

  constructor(registry: MetricRegistry, usage: CompanyUsage) {
    this.#usage = usage;
    this.#labelCounts(OTHER_COMPANIES);
    registry.counter(COMPANY_REQUESTS, (counter) => {
      this.#sync();
      this.#requests.flushInto(counter);
    });
    registry.counter(COMPANY_SLOTS, (counter) => {
      this.#sync();
      this.#slots.flushInto(counter);
    });
    registry.counter(COMPANY_SLOT_WAIT, (counter) => {
      this.#sync();
      this.#waited.flushInto(counter);
    });
  }

  /** Names companies while names are free, then hands every count not yet handed to its label. */
  #sync(): void {
    const { companies, overflow } = this.#usage.entries();
    const free = NAMED_COMPANIES - (this.#labels.size - 1);
    if (free > 0) {
      for (const [company] of this.#usage.ranking(NAMED_COMPANIES + free).companies) {
        if (this.#labels.size - 1 >= NAMED_COMPANIES) break;
        if (!this.#labels.has(company)) this.#labelCounts(company);
      }
    }
    const other = this.#labelCounts(OTHER_COMPANIES);
    for (const [company, counts] of companies) this.#hand(counts, this.#labels.get(company) ?? other);
    this.#hand(overflow, other);
  }

  #hand(counts: CompanyCounts, into: LabelCounts): void {
    let exported = this.#exported.get(counts);
    if (exported === undefined) {
      exported = { requests: counts.requests.map(() => 0), granted: 0, refused: 0, waitedMs: 0 };
      this.#exported.set(counts, exported);
    }
    counts.requests.forEach((count, i) => {
      const pending = into.requests[i];
      if (pending !== undefined) pending.pending += count - (exported.requests[i] ?? 0);
      exported.requests[i] = count;
    });
    into.granted.pending += counts.granted - exported.granted;
    into.refused.pending += counts.refused - exported.refused;
    into.waited.pending += (counts.waitedMs - exported.waitedMs) / 1000;
    exported.granted = counts.granted;
    exported.refused = counts.refused;
    exported.waitedMs = counts.waitedMs;
  }

  #labelCounts(company: string): LabelCounts {
    let labels = this.#labels.get(company);
    if (labels === undefined) {
      labels = {
        requests: COMPANY_CACHE_RESULTS.map((cache) => this.#requests.entry({ company, cache })),
        granted: this.#slots.entry({ company, result: 'granted' }),
        refused: this.#slots.entry({ company, result: 'refused' }),
        waited: this.#waited.entry({ company }),
      };
      this.#labels.set(company, labels);
    }
    return labels;
  }
}
