/** The report's charts: latency, throughput, hit ratio and upstream calls second by second, and the answers by status. */

import { type Bar, barChart, lineChart } from '../lib/svg-chart.js';
import type { LoadtestResult, SecondSample } from '../loadgen/types.js';

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

/** Line charts over the run's seconds. */
export function timelineCharts(timeline: readonly SecondSample[]): string[] {
  const at = (pick: (s: SecondSample) => number): [number, number][] => timeline.map((s) => [s.at, pick(s)]);
  return [
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
}

/** The answers by status code, the connection errors and timeouts beside them. */
export function statusBars(result: LoadtestResult): string {
  const bars: Bar[] = Object.entries(result.statusCodes)
    .sort((a, b) => b[1] - a[1])
    .map(([code, n]) => ({ label: code, value: n, color: statusColor(code) }));
  if (result.errors + result.timeouts > 0)
    bars.push({ label: 'errors', value: result.errors + result.timeouts, color: COLORS.errors });
  return barChart('statuses', 'Answers by status', bars);
}
