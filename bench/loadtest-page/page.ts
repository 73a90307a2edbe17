/**
 * The load test's report for people: one self-contained HTML page (inline SVG, inline styles, no
 * script, nothing fetched) with the topology it ran, the totals, latency percentiles, throughput,
 * hit ratio and upstream calls over time, the statuses, the seconds one by one, and the freshness
 * phase's figures when it ran (bench/loadtest-freshness-report.ts).
 */
import { fmt, fmtInt, fmtPercent } from '../lib/format.js';
import { escapeHtml } from '../lib/svg-chart.js';
import type { LoadtestResult, SecondSample } from '../loadgen/types.js';
import { freshnessHtml } from '../loadtest-freshness-report.js';
import { statusBars, timelineCharts } from './charts.js';
import { topologyDiagram } from './topology.js';
import type { LoadtestReport } from './types.js';

/** The stamp's `code` spans as <code>. */
function stampHtml(stamp: string): string {
  return escapeHtml(stamp).replace(/`([^`]+)`/g, '<code>$1</code>');
}

const cell = (text: string): string => `<td>${escapeHtml(text)}</td>`;

/** A two-column table: a heading cell and a value per row. */
function keyValueTable(id: string, rows: readonly (readonly [string, string])[]): string {
  return `<table id="${id}">${rows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th>${cell(v)}</tr>`).join('')}</table>`;
}

function totalsRows(result: LoadtestResult): [string, string][] {
  return [
    ['requests', `${fmtInt(result.requests)} (${fmtInt(result.requestsPerSecond)} req/s)`],
    [
      'latency p50 / p90 / p99 / max',
      `${fmt(result.latencyMs.p50)} / ${fmt(result.latencyMs.p90)} / ${fmt(result.latencyMs.p99)} / ${fmt(result.latencyMs.max)} ms`,
    ],
    ['hit ratio (hit + stale)', fmtPercent(result.hitRatio)],
    [
      'upstream requests',
      `${fmtInt(result.upstreamRequests)}${result.sandboxServed === undefined ? '' : ` (the sandbox served ${fmtInt(result.sandboxServed)})`}, ${fmtInt(result.upstreamRefusals)} kept off by the guard`,
    ],
    ['coalesced waits', fmtInt(result.coalescedWaits)],
    ['connection errors / timeouts', `${String(result.errors)} / ${String(result.timeouts)}`],
    ['Redis errors', fmtInt(result.redisErrors)],
  ];
}

function topologyRows(report: LoadtestReport): [string, string][] {
  const { topology } = report;
  return [
    ['Redis', `${topology.redis.description}: ${topology.redis.nodes.join(', ')}`],
    ['sandbox system of record', topology.sandbox],
    ...topology.replicas.map((replica, i): [string, string] => [`proxy ${String(i + 1)}`, replica]),
    ['balancer', `${topology.balancer} (round robin over the replicas)`],
    [
      'load generator',
      `${topology.generator}, ${String(report.settings.connections)} connections, ${String(report.settings.seconds)} s`,
    ],
  ];
}

/** The seconds one by one, as table rows. */
function perSecondRows(timeline: readonly SecondSample[]): string {
  return timeline
    .map(
      (s) =>
        `<tr>${[fmt(s.at, 1), fmtInt(s.requestsPerSecond), fmt(s.p50Ms), fmt(s.p90Ms), fmt(s.p99Ms), fmt(s.maxMs), String(s.errors), fmtPercent(s.hitRatio), String(s.upstreamRequests)].map(cell).join('')}</tr>`,
    )
    .join('\n');
}

export function renderLoadtestHtml(report: LoadtestReport): string {
  const { result } = report;
  return `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>slab-ops-proxy load test, ${escapeHtml(report.date.slice(0, 10))}</title>
<style>
  body { font-family: system-ui, sans-serif; margin: 24px auto; max-width: 940px; color: #222; }
  h1 { font-size: 22px; margin-bottom: 4px; }
  h2 { font-size: 16px; margin-top: 28px; border-bottom: 1px solid #ddd; padding-bottom: 4px; }
  .stamp { color: #555; font-size: 13px; }
  table { border-collapse: collapse; font-size: 13px; }
  td, th { padding: 3px 10px 3px 0; text-align: left; vertical-align: top; }
  table.numbers td { text-align: right; }
  h3 { font-size: 14px; margin-top: 18px; }
  p.note { font-size: 13px; }
  figure { margin: 12px 0; }
</style>
</head>
<body>
<h1>slab-ops-proxy load test</h1>
<p class="stamp">${stampHtml(report.stamp)} &middot; ${escapeHtml(report.machine.cpu)}, Node ${escapeHtml(report.machine.node)}</p>
<h2>Topology</h2>
${topologyDiagram(report)}
${keyValueTable('topology', topologyRows(report))}
<h2>Totals</h2>
${keyValueTable('totals', totalsRows(result))}
<h2>Over time</h2>
${timelineCharts(result.timeline).join('\n')}
<h2>Statuses</h2>
${statusBars(result)}
<h2>Per second</h2>
<details><summary>${String(result.timeline.length)} seconds</summary>
<table class="numbers" id="per-second"><tr>${['t (s)', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'errors', 'hit ratio', 'upstream'].map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr>
${perSecondRows(result.timeline)}
</table></details>
${report.freshness === undefined ? '' : freshnessHtml(report.freshness)}
</body>
</html>
`;
}
