/**
 * Per-company figures of this replica (`/admin/companies`, docs/operations.md#per-company-figures):
 * the companies with the most requests, each with its requests by cache result, its hit ratio, its
 * clients' turns at the upstream budget, and the bytes it holds in the in-process cache tier; every
 * other company summed as `other`.
 */
import type { IRouter, Request, Response } from 'express';
import { InvalidParameterError } from '../../errors/proxy-error.js';
import { COMPANY_CACHE_RESULTS, type CompanyCounts, MAX_COMPANIES } from '../../observability/company-usage.js';
import type { Metrics } from '../../observability/metrics.js';
import { noStore, problem } from './operator-io.js';

/** Companies listed by default. */
const DEFAULT_TOP = 20;

export interface CompanyFigures {
  readonly metrics: Pick<Metrics, 'companies'>;
  /** Bytes each company holds in the in-process cache tier (the L1, or the single replica's store). */
  readonly cacheBytes: () => ReadonlyMap<string, number>;
}

export function companyRoutes(router: IRouter, { metrics, cacheBytes }: CompanyFigures): void {
  router.get('/admin/companies', function listCompanies(req: Request, res: Response) {
    const top = topOf(req.query.top);
    if (top instanceof InvalidParameterError) return problem(req, res, top);
    const ranking = metrics.companies(top);
    const bytes = cacheBytes();
    let listedBytes = 0;
    const companies = ranking.companies.map(([company, counts]) => {
      const held = bytes.get(company) ?? 0;
      listedBytes += held;
      return { company, ...figures(counts, held) };
    });
    let allBytes = 0;
    for (const held of bytes.values()) allBytes += held;
    noStore(res).json({ companies, other: figures(ranking.other, allBytes - listedBytes), tracked: ranking.tracked });
  });
}

function topOf(value: unknown): number | InvalidParameterError {
  if (value === undefined) return DEFAULT_TOP;
  const text = typeof value === 'string' ? value : '';
  const top = Number(text);
  return /^[1-9][0-9]{0,3}$/.test(text) && top <= MAX_COMPANIES
    ? top
    : new InvalidParameterError('top', `1 to ${String(MAX_COMPANIES)}.`);
}

/** A company's figures as listed; `hitRatio` is the share of its reads answered from the cache (hit or stale). */
function figures(counts: CompanyCounts, cacheBytes: number) {
  const cache = Object.fromEntries(COMPANY_CACHE_RESULTS.map((result, i) => [result, counts.requests[i] ?? 0]));
  const reads = counts.total - (cache.none ?? 0);
  return {
    requests: counts.total,
    cache,
    hitRatio: reads === 0 ? null : ((cache.hit ?? 0) + (cache.stale ?? 0)) / reads,
    upstreamSlots: { granted: counts.granted, refused: counts.refused, waitedSeconds: counts.waitedMs / 1000 },
    cacheBytes,
  };
}
