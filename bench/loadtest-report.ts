/**
 * The load test's report: one self-contained HTML file next to the run's JSON
 * (bench/loadtest-page/page.ts, with the topology drawn by bench/loadtest-page/topology.ts),
 * and the Markdown lines docs/load-test.md takes verbatim, the freshness phase's figures included
 * when it ran (bench/loadtest-freshness-report.ts).
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fmt, fmtInt, fmtPercent, markdownTable } from './lib/format.js';
import { freshnessMarkdown } from './loadtest-freshness-report.js';
import { renderLoadtestHtml } from './loadtest-page/page.js';
import type { LoadtestReport } from './loadtest-page/types.js';

// What `npm run loadtest` (bench/loadtest.ts) and the report's tests read.
export { renderLoadtestHtml } from './loadtest-page/page.js';
export type { LoadtestReport } from './loadtest-page/types.js';

/** The lines for docs/load-test.md: the stamp, the totals as a two-column table, then the freshness figures. */
export function loadtestMarkdown(report: LoadtestReport): string[] {
  const { result } = report;
  const statuses = Object.entries(result.statusCodes)
    .map(([code, n]) => `${fmtInt(n)} × ${code}`)
    .join(', ');
  return [
    report.stamp,
    '',
    ...markdownTable(
      ['figure', 'this run'],
      [
        [
          'topology',
          `${String(report.topology.replicas.length)} replicas behind a round-robin balancer; ${report.topology.redis.description}`,
        ],
        ['requests', `${fmtInt(result.requests)} (${fmtInt(result.requestsPerSecond)} req/s)`],
        [
          'latency p50 / p90 / p99 / max',
          `${fmt(result.latencyMs.p50)} / ${fmt(result.latencyMs.p90)} / ${fmt(result.latencyMs.p99)} / ${fmt(result.latencyMs.max)} ms`,
        ],
        ['statuses', statuses === '' ? 'none' : statuses],
        ['connection errors / timeouts', `${String(result.errors)} / ${String(result.timeouts)}`],
        ['hit ratio (hit + stale)', fmtPercent(result.hitRatio)],
        [
          'upstream requests',
          `${fmtInt(result.upstreamRequests)} (${fmt(result.upstreamRequests / report.settings.seconds, 1)}/s)` +
            (result.sandboxServed === undefined ? '' : `; the sandbox served ${fmtInt(result.sandboxServed)}`),
        ],
        ['coalesced waits', fmtInt(result.coalescedWaits)],
        ['Redis errors', fmtInt(result.redisErrors)],
      ],
      ['left', 'left'],
    ),
    ...(report.freshness === undefined ? [] : ['', ...freshnessMarkdown(report.freshness)]),
  ];
}

/** Writes `<dir>/loadtest-<date-time>.json` and `.html`; returns their absolute paths. */
export function writeLoadtestReport(dir: string, report: LoadtestReport): { json: string; html: string } {
  mkdirSync(dir, { recursive: true });
  const base = `loadtest-${report.date.replace(/[:.]/g, '-').replace(/-\d+Z$/, 'Z')}`;
  const json = resolve(join(dir, `${base}.json`));
  const html = resolve(join(dir, `${base}.html`));
  writeFileSync(json, `${JSON.stringify(report, null, 2)}\n`);
  writeFileSync(html, renderLoadtestHtml(report));
  return { json, html };
}
