/** The load test's totals as the load generator prints them, then the `LOADTEST_RESULT {json}` line for machines. */
import { fmt, fmtPercent } from '../lib/format.js';
import type { LoadtestResult } from './types.js';

export function formatReport(result: LoadtestResult, seconds: number): string {
  const rows: [string, string][] = [
    ['requests', `${String(result.requests)} (${result.requestsPerSecond.toFixed(0)} req/s)`],
    [
      'latency p50 / p90 / p99 / max',
      `${fmt(result.latencyMs.p50)} / ${fmt(result.latencyMs.p90)} / ${fmt(result.latencyMs.p99)} / ${fmt(result.latencyMs.max)} ms`,
    ],
    [
      'statuses',
      Object.entries(result.statusCodes)
        .map(([k, v]) => `${k} ${String(v)}`)
        .join(', ') || 'none',
    ],
    ['connection errors / timeouts', `${String(result.errors)} / ${String(result.timeouts)}`],
    ['hit ratio (hit + stale)', fmtPercent(result.hitRatio)],
    ['coalesced waits', String(result.coalescedWaits)],
    [
      'upstream requests',
      `${String(result.upstreamRequests)} (${(result.upstreamRequests / seconds).toFixed(1)}/s), ${String(result.upstreamRefusals)} kept off by the guard`,
    ],
    ['sandbox served', result.sandboxServed === undefined ? 'n/a (SANDBOX_CONTROL off)' : String(result.sandboxServed)],
    ['Redis errors', String(result.redisErrors)],
  ];
  const { walks, prefetches } = result;
  if (walks !== undefined) {
    rows.push([
      'keyset walks',
      `${String(walks.walks)} by ${String(walks.walkers)} walkers, ${String(walks.pages)} pages: median ${fmt(walks.medianSeconds)} s, longest ${fmt(walks.maxSeconds)} s, ${String(walks.failures)} failed`,
    ]);
  }
  if (prefetches !== undefined) {
    const started = prefetches.started ?? 0;
    const used = prefetches.used ?? 0;
    const wasted = prefetches.wasted ?? 0;
    rows.push([
      'prefetches',
      `${String(started)} started, ${String(used)} used, ${String(wasted)} wasted, ${String(Math.max(0, started - used - wasted))} not taken yet`,
    ]);
  }
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`).join('\n');
}

/** The report, then the machine-readable line (`LOADTEST_RESULT {json}`) last. */
export function printReport(result: LoadtestResult, seconds: number): void {
  process.stdout.write(`${formatReport(result, seconds)}\nLOADTEST_RESULT ${JSON.stringify(result)}\n`);
}
