/**
 * What the replicas and the sandbox count, read around the load: the replicas' `/metrics` summed
 * over the replicas (requests by cache result, coalesced waits, upstream requests and refusals,
 * Redis errors, prefetches), differences taken between two reads; the sandbox's `/__sandbox/stats`
 * when its control API is on.
 */
import { sandboxStats } from '../lib/http.js';
import type { LoadOptions } from './types.js';

/** Sums of the replicas' counters that the report needs, by series. */
export type Totals = Map<string, number>;

/** Reads Prometheus text for the few series the report sums (labels kept as written). */
function addSeries(text: string, totals: Totals): void {
  for (const line of text.split('\n')) {
    if (line.startsWith('#') || line === '') continue;
    const space = line.lastIndexOf(' ');
    const series = line.slice(0, space);
    if (
      !/^slab_proxy_(requests_total|coalesced_waits_total|upstream_requests_total|upstream_refusals_total|redis_errors_total|prefetches_total)\b/.test(
        series,
      )
    )
      continue;
    const value = Number(line.slice(space + 1));
    if (Number.isFinite(value)) totals.set(series, (totals.get(series) ?? 0) + value);
  }
}

export async function scrape(adminUrls: readonly string[]): Promise<Totals> {
  const totals: Totals = new Map();
  for (const url of adminUrls) {
    const res = await fetch(`${url}/metrics`);
    if (!res.ok) throw new Error(`${url}/metrics answered ${String(res.status)}`);
    addSeries(await res.text(), totals);
  }
  return totals;
}

export function sum(before: Totals, after: Totals, match: (series: string) => boolean): number {
  let total = 0;
  for (const [series, value] of after) if (match(series)) total += value - (before.get(series) ?? 0);
  return total;
}

export const isUpstreamSeries = (series: string): boolean => series.startsWith('slab_proxy_upstream_requests_total');

export function hitRatioBetween(before: Totals, after: Totals): number | undefined {
  const byCache = (cache: string): number =>
    sum(before, after, (s) => s.startsWith('slab_proxy_requests_total{') && s.includes(`cache="${cache}"`));
  const withCache = ['hit', 'stale', 'miss', 'collapsed'].reduce((total, cache) => total + byCache(cache), 0);
  return withCache === 0 ? undefined : (byCache('hit') + byCache('stale')) / withCache;
}

/** The replicas' prefetches over the run, by result. */
export function prefetchesBetween(before: Totals, after: Totals): Record<string, number> {
  const byResult: Record<string, number> = {};
  for (const series of after.keys()) {
    const result = /^slab_proxy_prefetches_total\{result="([a-z]+)"\}/.exec(series)?.[1];
    if (result !== undefined) byResult[result] = sum(before, after, (s) => s === series);
  }
  return byResult;
}

/** The sandbox's counters, or undefined when they are off (SANDBOX_CONTROL unset) or unreachable. */
export async function sandboxCounts(
  sandboxUrl: string | undefined,
): Promise<{ served: number; inFlight: number } | undefined> {
  if (sandboxUrl === undefined) return undefined;
  return sandboxStats(sandboxUrl).then(
    (stats) => ({ served: stats.served, inFlight: stats.inFlight }),
    () => undefined,
  );
}

/**
 * The counters once the run's last fills are over: when the load stops, background refreshes and
 * fills may still be at the upstream, counted by the sandbox on arrival and by the replicas on the
 * answer. Read until the sandbox is idle and both agree (or the counts stop moving), for 2 s at most.
 */
export async function settledCounts(
  options: LoadOptions,
  before: Totals,
  servedBefore: number | undefined,
): Promise<{ after: Totals; served: number | undefined }> {
  let previous: number | undefined;
  let last: { after: Totals; served: number | undefined } = { after: before, served: undefined };
  for (let round = 0; round < 40; round++) {
    const after = await scrape(options.adminUrls);
    const counts = await sandboxCounts(options.sandboxUrl);
    const upstream = sum(before, after, isUpstreamSeries);
    const served = counts === undefined || servedBefore === undefined ? undefined : counts.served - servedBefore;
    last = { after, served };
    if (served === undefined ? upstream === previous : counts?.inFlight === 0 && served === upstream) return last;
    previous = upstream;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return last;
}
