/**
 * The load test's report for people: one self-contained HTML file (inline SVG, inline styles, no
 * script, nothing fetched) next to the run's JSON, with the topology it ran, the totals, latency
 * percentiles, throughput, hit ratio and upstream calls over time, the statuses, and the freshness
 * phase's figures when it ran (bench/loadtest-freshness-report.ts). Also the Markdown lines
 * docs/load-test.md takes verbatim.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { fmt, fmtInt, markdownTable } from './lib/format.js';
import type { RedisMode } from './lib/services.js';
import { type Bar, barChart, escapeHtml, lineChart } from './lib/svg-chart.js';
import type { LoadtestResult } from './loadgen.js';
import type { LoadtestFreshness } from './loadtest-freshness.js';
import { freshnessHtml, freshnessMarkdown } from './loadtest-freshness-report.js';

export interface LoadtestTopology {
  readonly redis: { readonly mode: RedisMode; readonly description: string; readonly nodes: readonly string[] };
  readonly sandbox: string;
  readonly replicas: readonly string[];
  readonly balancer: string;
  readonly generator: string;
}

export interface LoadtestReport {
  /** e.g. "`npm run loadtest`, 2026-11-23, 2 cores, …": where the figures come from. */
  readonly stamp: string;
  readonly date: string;
  readonly machine: { readonly cores: number; readonly cpu: string; readonly node: string };
  readonly settings: {
    readonly seconds: number;
    readonly connections: number;
    readonly replicas: number;
    readonly redis: RedisMode;
  };
  readonly topology: LoadtestTopology;
  readonly result: LoadtestResult;
  /** The freshness phase's figures; absent when LOADTEST_FRESHNESS_SECONDS=0. */
  readonly freshness?: LoadtestFreshness;
}

const percent = (ratio: number | undefined): string => (ratio === undefined ? 'n/a' : `${(ratio * 100).toFixed(1)}%`);

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
        ['hit ratio (hit + stale)', percent(result.hitRatio)],
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

const COLORS = {
  p50: '#2a9d8f',
  p90: '#e9c46a',
  p99: '#e76f51',
  max: '#9b2226',
  rps: '#264653',
  hit: '#2a9d8f',
  upstream: '#6d597a',
  errors: '#d62828',
};

function statusColor(code: string): string {
  return code.startsWith('2')
    ? '#2a9d8f'
    : code.startsWith('3')
      ? '#8ab17d'
      : code.startsWith('4')
        ? '#e9c46a'
        : '#e76f51';
}

/** `:port` of a URL (the diagram's short form; the table below has the whole address). */
function portOf(url: string): string {
  try {
    return `:${new URL(url).port}`;
  } catch {
    return url;
  }
}

/** Boxes and arrows: generator → balancer → replicas → Redis and the sandbox. */
function topologyDiagram(report: LoadtestReport): string {
  const { topology } = report;
  const width = 900;
  const boxHeight = 40;
  const rowHeight = 50;
  const replicaCount = topology.replicas.length;
  const height = Math.max(2 * rowHeight + 40, 20 + replicaCount * rowHeight);
  const font = 'font-family="system-ui, sans-serif"';
  const box = (x: number, y: number, w: number, label: string, sub: string, cls: string): string =>
    `<g class="node ${cls}"><rect x="${String(x)}" y="${y.toFixed(1)}" width="${String(w)}" height="${String(boxHeight)}" rx="6" fill="#f4f1de" stroke="#3d405b"/>` +
    `<text x="${String(x + w / 2)}" y="${(y + 17).toFixed(1)}" text-anchor="middle" ${font} font-size="13" font-weight="600">${escapeHtml(label)}</text>` +
    `<text x="${String(x + w / 2)}" y="${(y + 32).toFixed(1)}" text-anchor="middle" ${font} font-size="11" fill="#555">${escapeHtml(sub)}</text></g>`;
  const arrow = (x1: number, y1: number, x2: number, y2: number): string =>
    `<line x1="${String(x1)}" y1="${y1.toFixed(1)}" x2="${String(x2)}" y2="${y2.toFixed(1)}" stroke="#3d405b" stroke-width="1.5" marker-end="url(#arrow)"/>`;
  const centre = height / 2;
  const redisY = height * 0.3 - boxHeight / 2;
  const sandboxY = height * 0.7 - boxHeight / 2;
  const parts = [
    `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${String(width)} ${String(height)}" width="${String(width)}" height="${String(height)}" role="img" aria-label="topology">`,
    '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto-start-reverse"><path d="M0,0 L10,5 L0,10 z" fill="#3d405b"/></marker></defs>',
    box(
      10,
      centre - boxHeight / 2,
      150,
      'load generator',
      `${String(report.settings.connections)} connections`,
      'generator',
    ),
    arrow(160, centre, 210, centre),
    box(210, centre - boxHeight / 2, 150, 'balancer', `${portOf(topology.balancer)} round robin`, 'balancer'),
  ];
  const top = (height - replicaCount * rowHeight) / 2 + (rowHeight - boxHeight) / 2;
  topology.replicas.forEach((replica, i) => {
    const y = top + i * rowHeight;
    parts.push(
      arrow(360, centre, 420, y + boxHeight / 2),
      box(420, y, 160, `proxy ${String(i + 1)}`, portOf(replica), 'replica'),
      arrow(580, y + boxHeight / 2, 650, redisY + boxHeight / 2),
      arrow(580, y + boxHeight / 2, 650, sandboxY + boxHeight / 2),
    );
  });
  const nodes = topology.redis.nodes.length;
  parts.push(
    box(
      650,
      redisY,
      240,
      topology.redis.mode === 'cluster' ? 'Redis Cluster' : 'Redis',
      `${String(nodes)} ${nodes === 1 ? 'node' : 'nodes'}`,
      'redis',
    ),
    box(650, sandboxY, 240, 'sandbox (system of record)', portOf(topology.sandbox), 'sandbox'),
    '</svg>',
  );
  return `<figure class="chart" data-chart="topology">${parts.join('')}</figure>`;
}

/** The stamp's `code` spans as <code>. */
function stampHtml(stamp: string): string {
  return escapeHtml(stamp).replace(/`([^`]+)`/g, '<code>$1</code>');
}

export function renderLoadtestHtml(report: LoadtestReport): string {
  const { result, topology } = report;
  const timeline = result.timeline;
  const at = (pick: (s: (typeof timeline)[number]) => number): [number, number][] =>
    timeline.map((s) => [s.at, pick(s)]);
  const charts = [
    lineChart({
      id: 'latency',
      title: 'Latency percentiles per second',
      yLabel: 'ms',
      series: [
        { name: 'p50', color: COLORS.p50, points: at((s) => s.p50Ms) },
        { name: 'p90', color: COLORS.p90, points: at((s) => s.p90Ms) },
        { name: 'p99', color: COLORS.p99, points: at((s) => s.p99Ms) },
      ],
    }),
    lineChart({
      id: 'throughput',
      title: 'Throughput',
      yLabel: 'requests / s',
      series: [{ name: 'req/s', color: COLORS.rps, points: at((s) => s.requestsPerSecond) }],
    }),
    lineChart({
      id: 'hit-ratio',
      title: 'Hit ratio (hit + stale), over the replicas',
      yLabel: '%',
      yMax: 100,
      series: [
        {
          name: 'hit ratio',
          color: COLORS.hit,
          points: at((s) => (s.hitRatio === undefined ? Number.NaN : s.hitRatio * 100)),
        },
      ],
    }),
    lineChart({
      id: 'upstream',
      title: 'Upstream calls and errors per second',
      yLabel: 'per second',
      series: [
        {
          name: 'upstream calls',
          color: COLORS.upstream,
          points: timeline.map((s, i) => [
            s.at,
            s.upstreamRequests / Math.max(0.05, s.at - (timeline[i - 1]?.at ?? 0)),
          ]),
        },
        { name: 'errors', color: COLORS.errors, points: at((s) => s.errors) },
      ],
    }),
  ];
  const bars: Bar[] = Object.entries(result.statusCodes)
    .sort((a, b) => b[1] - a[1])
    .map(([code, n]) => ({ label: code, value: n, color: statusColor(code) }));
  if (result.errors + result.timeouts > 0)
    bars.push({ label: 'errors', value: result.errors + result.timeouts, color: COLORS.errors });
  const cell = (text: string): string => `<td>${escapeHtml(text)}</td>`;
  const totals: [string, string][] = [
    ['requests', `${fmtInt(result.requests)} (${fmtInt(result.requestsPerSecond)} req/s)`],
    [
      'latency p50 / p90 / p99 / max',
      `${fmt(result.latencyMs.p50)} / ${fmt(result.latencyMs.p90)} / ${fmt(result.latencyMs.p99)} / ${fmt(result.latencyMs.max)} ms`,
    ],
    ['hit ratio (hit + stale)', percent(result.hitRatio)],
    [
      'upstream requests',
      `${fmtInt(result.upstreamRequests)}${result.sandboxServed === undefined ? '' : ` (the sandbox served ${fmtInt(result.sandboxServed)})`}, ${fmtInt(result.upstreamRefusals)} kept off by the guard`,
    ],
    ['coalesced waits', fmtInt(result.coalescedWaits)],
    ['connection errors / timeouts', `${String(result.errors)} / ${String(result.timeouts)}`],
    ['Redis errors', fmtInt(result.redisErrors)],
  ];
  const topologyRows: [string, string][] = [
    ['Redis', `${topology.redis.description}: ${topology.redis.nodes.join(', ')}`],
    ['sandbox system of record', topology.sandbox],
    ...topology.replicas.map((replica, i): [string, string] => [`proxy ${String(i + 1)}`, replica]),
    ['balancer', `${topology.balancer} (round robin over the replicas)`],
    [
      'load generator',
      `${topology.generator}, ${String(report.settings.connections)} connections, ${String(report.settings.seconds)} s`,
    ],
  ];
  const perSecond = timeline
    .map(
      (s) =>
        `<tr>${[fmt(s.at, 1), fmtInt(s.requestsPerSecond), fmt(s.p50Ms), fmt(s.p90Ms), fmt(s.p99Ms), fmt(s.maxMs), String(s.errors), percent(s.hitRatio), String(s.upstreamRequests)].map(cell).join('')}</tr>`,
    )
    .join('\n');
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
<table id="topology">${topologyRows.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th>${cell(v)}</tr>`).join('')}</table>
<h2>Totals</h2>
<table id="totals">${totals.map(([k, v]) => `<tr><th>${escapeHtml(k)}</th>${cell(v)}</tr>`).join('')}</table>
<h2>Over time</h2>
${charts.join('\n')}
<h2>Statuses</h2>
${barChart('statuses', 'Answers by status', bars)}
<h2>Per second</h2>
<details><summary>${String(timeline.length)} seconds</summary>
<table class="numbers" id="per-second"><tr>${['t (s)', 'req/s', 'p50 ms', 'p90 ms', 'p99 ms', 'max ms', 'errors', 'hit ratio', 'upstream'].map((h) => `<th>${escapeHtml(h)}</th>`).join('')}</tr>
${perSecond}
</table></details>
${report.freshness === undefined ? '' : freshnessHtml(report.freshness)}
</body>
</html>
`;
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
