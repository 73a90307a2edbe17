/**
 * Per-company figures (src/observability/company-usage.ts, metrics/company-series.ts): the ranking
 * sums exactly what was counted, bounded at MAX_COMPANIES; the metrics name at most ten companies,
 * for the life of the process, and every series only grows — a company named late keeps in `other`
 * what it had counted before — so that the per-company series sum to the totals at every scrape.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { CompanyUsage, MAX_COMPANIES } from '../../src/observability/company-usage.js';
import { NAMED_COMPANIES } from '../../src/observability/metrics/definitions.js';
import { createMetrics } from '../../src/observability/metrics.js';
import { parseExposition } from '../helpers/prometheus.js';

describe('CompanyUsage', () => {
  it('ranks companies by requests and sums the rest, the companies beyond its bound included', () => {
    const usage = new CompanyUsage();
    for (let i = 0; i < 5; i++) usage.request('a', 'hit');
    usage.request('a', 'miss');
    for (let i = 0; i < 3; i++) usage.request('b', 'stale');
    usage.request('c', undefined);
    usage.slot('b', true, 120);
    usage.slot('b', false, 2_000);
    const ranking = usage.ranking(2);
    expect(ranking.companies.map(([company, counts]) => [company, counts.total])).toEqual([
      ['a', 6],
      ['b', 3],
    ]);
    expect(ranking.companies[1]?.[1]).toMatchObject({ granted: 1, refused: 1, waitedMs: 2_120 });
    expect(ranking.other.total).toBe(1);
    expect(ranking.tracked).toBe(3);

    const many = new CompanyUsage();
    for (let i = 0; i < MAX_COMPANIES + 50; i++) many.request(`c${String(i)}`, 'hit');
    const all = many.ranking(10);
    expect(all.tracked).toBe(MAX_COMPANIES);
    expect(all.other.total + all.companies.reduce((sum, [, counts]) => sum + counts.total, 0)).toBe(MAX_COMPANIES + 50);
  });
});

/** The per-company request series of a scrape, by company, summed over cache results. */
async function byCompany(render: () => Promise<string>): Promise<Map<string, number>> {
  const sums = new Map<string, number>();
  for (const { labels, value } of parseExposition(await render()).series('slab_proxy_company_requests_total'))
    sums.set(labels.company ?? '', (sums.get(labels.company ?? '') ?? 0) + value);
  return sums;
}

describe('the per-company series', () => {
  it('name at most ten companies, never move a count between labels, and sum to the requests', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.array(fc.array(fc.integer({ min: 0, max: 24 }), { maxLength: 60 }), { minLength: 1, maxLength: 6 }),
        async (rounds) => {
          const metrics = createMetrics({ processMetrics: false });
          let before = new Map<string, number>();
          let total = 0;
          for (const round of rounds) {
            for (const company of round) metrics.request('receipts', 200, 'hit', 0.001, `c${String(company)}`);
            total += round.length;
            const now = await byCompany(() => metrics.render());
            expect(now.size).toBeLessThanOrEqual(NAMED_COMPANIES + 1);
            for (const [company, value] of before) expect(now.get(company) ?? 0).toBeGreaterThanOrEqual(value);
            expect([...now.values()].reduce((sum, value) => sum + value, 0)).toBe(total);
            before = now;
          }
        },
      ),
      { numRuns: 40 },
    );
  });

  it("show the companies' slots and the bytes each holds, the largest named and the rest as other", async () => {
    const bytes = new Map(Array.from({ length: 12 }, (_, i) => [`c${String(i)}`, (i + 1) * 1_000] as const));
    const metrics = createMetrics({ processMetrics: false, companyCacheBytes: () => bytes });
    metrics.request('receipts', 200, 'miss', 0.1, 'c1');
    metrics.companySlot('c1', true, 0.25);
    metrics.companySlot('c1', false, 2);
    const text = parseExposition(await metrics.render());
    expect(text.value('slab_proxy_company_upstream_slots_total', { company: 'c1', result: 'granted' })).toBe(1);
    expect(text.value('slab_proxy_company_upstream_slots_total', { company: 'c1', result: 'refused' })).toBe(1);
    expect(text.value('slab_proxy_company_upstream_wait_seconds_total', { company: 'c1' })).toBeCloseTo(2.25);
    expect(text.value('slab_proxy_company_cache_bytes', { company: 'c11' })).toBe(12_000);
    expect(text.value('slab_proxy_company_cache_bytes', { company: 'other' })).toBe(1_000 + 2_000);
    expect(text.series('slab_proxy_company_cache_bytes')).toHaveLength(NAMED_COMPANIES + 1);
    bytes.clear();
    bytes.set('c5', 10);
    // A company no longer holding is no longer shown.
    const after = parseExposition(await metrics.render()).series('slab_proxy_company_cache_bytes');
    expect(after.map((series) => series.labels.company).sort()).toEqual(['c5', 'other']);
  });
});
