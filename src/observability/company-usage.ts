/**
 * What each company asked of this replica (docs/operations.md#per-company-figures): its requests by
 * cache result, and the upstream slots it was granted, was refused and waited for. Bounded: the
 * first `MAX_COMPANIES` companies seen are counted each on their own, any later one in `other`.
 * The admin API lists the top companies from here; the metrics name a few of them for the life of
 * the process (company-series in metrics.ts), so that each series only ever grows.
 */

/** What a company's request was for the cache: its result, or `none` (not a read, or refused before). */
export const COMPANY_CACHE_RESULTS = ['hit', 'stale', 'miss', 'collapsed', 'bypass', 'none'] as const;
export type CompanyCacheResult = (typeof COMPANY_CACHE_RESULTS)[number];

/** Companies counted each on their own, at most; one more is counted in `other`. */
export const MAX_COMPANIES = 1_000;

/** One company's counts (or `other`'s), mutable: the hot path adds to them in place. */
export class CompanyCounts {
  /** Requests by cache result, in `COMPANY_CACHE_RESULTS` order. */
  readonly requests = new Array<number>(COMPANY_CACHE_RESULTS.length).fill(0);
  granted = 0;
  refused = 0;
  /** Milliseconds waited for slots, granted or refused. */
  waitedMs = 0;

  get total(): number {
    let total = 0;
    for (const count of this.requests) total += count;
    return total;
  }

  addTo(sum: CompanyCounts): void {
    for (let i = 0; i < this.requests.length; i++) sum.requests[i] = (sum.requests[i] ?? 0) + (this.requests[i] ?? 0);
    sum.granted += this.granted;
    sum.refused += this.refused;
    sum.waitedMs += this.waitedMs;
  }
}

const RESULT_INDEX = new Map<string, number>(COMPANY_CACHE_RESULTS.map((result, i) => [result, i]));

export interface CompanyRanking {
  readonly companies: ReadonlyArray<readonly [company: string, counts: CompanyCounts]>;
  /** Every company not listed, and those beyond `MAX_COMPANIES`. */
  readonly other: CompanyCounts;
  /** Companies counted on their own. */
  readonly tracked: number;
}

export class CompanyUsage {
  readonly #companies = new Map<string, CompanyCounts>();
  /** The companies beyond `MAX_COMPANIES`. */
  readonly #overflow = new CompanyCounts();

  /** One request answered for `company`: one lookup and one addition. */
  request(company: string, cache: string | undefined): void {
    const index = RESULT_INDEX.get(cache ?? 'none') ?? COMPANY_CACHE_RESULTS.length - 1;
    const counts = this.#countsOf(company);
    counts.requests[index] = (counts.requests[index] ?? 0) + 1;
  }

  /** One client fill's turn at the upstream budget: granted or refused, after `waitedMs`. */
  slot(company: string, granted: boolean, waitedMs: number): void {
    const counts = this.#countsOf(company);
    if (granted) counts.granted += 1;
    else counts.refused += 1;
    counts.waitedMs += waitedMs;
  }

  /** The `top` companies by requests, most first; the rest summed as `other`. */
  ranking(top: number): CompanyRanking {
    const sorted = [...this.#companies].sort((a, b) => b[1].total - a[1].total || (a[0] < b[0] ? -1 : 1));
    const other = new CompanyCounts();
    this.#overflow.addTo(other);
    for (const [, counts] of sorted.slice(top)) counts.addTo(other);
    return { companies: sorted.slice(0, top), other, tracked: this.#companies.size };
  }

  /** Each company counted on its own, and the overflow's counts (for the metrics). */
  entries(): { readonly companies: ReadonlyMap<string, CompanyCounts>; readonly overflow: CompanyCounts } {
    return { companies: this.#companies, overflow: this.#overflow };
  }

  #countsOf(company: string): CompanyCounts {
    let counts = this.#companies.get(company);
    if (counts === undefined) {
      if (this.#companies.size >= MAX_COMPANIES) return this.#overflow;
      counts = new CompanyCounts();
      this.#companies.set(company, counts);
    }
    return counts;
  }
}
