/**
 * The load test's HTML report and its lines for docs/load-test.md, from a made-up run: every second is a point of
 * every chart, seconds without a figure are gaps rather than zeros, whatever text the run carries
 * is escaped, and the page loads nothing from anywhere (the browser test draws a real run's); the
 * freshness phase's figures, when it ran, are a table a variant and staleness by replica.
 */
import { describe, expect, it } from 'vitest';
import type { GroupFreshness } from '../../bench/lib/freshness-figures.js';
import type { SecondSample } from '../../bench/loadgen.js';
import type { LoadtestFreshness, LoadtestFreshnessRun } from '../../bench/loadtest-freshness.js';
import { type LoadtestReport, loadtestMarkdown, renderLoadtestHtml } from '../../bench/loadtest-report.js';

function second(at: number, hitRatio: number | undefined): SecondSample {
  return {
    at,
    requests: 1000 * at,
    requestsPerSecond: 1000 * at,
    p50Ms: 1.5,
    p90Ms: 4,
    p99Ms: 12 + at,
    maxMs: 40,
    errors: 0,
    statuses: { '200': 1000 * at },
    hitRatio,
    upstreamRequests: 5,
  };
}

const HOSTILE = '<script>alert("x")</script> & "quoted"';

const report: LoadtestReport = {
  stamp: '`npm run loadtest`, 2026-11-23, 2 cores, 3 replicas, one Redis, 3 s, 32 connections',
  date: '2026-11-23T10:00:00.000Z',
  machine: { cores: 2, cpu: HOSTILE, node: 'v20.20.2' },
  settings: { seconds: 3, connections: 32, replicas: 3, redis: 'single' },
  topology: {
    redis: { mode: 'single', description: 'redis-server 7.0.15, one node', nodes: ['127.0.0.1:6400'] },
    sandbox: 'http://127.0.0.1:6401',
    replicas: ['http://127.0.0.1:6402', 'http://127.0.0.1:6403', 'http://127.0.0.1:6404'],
    balancer: 'http://127.0.0.1:6405',
    generator: HOSTILE,
  },
  result: {
    requests: 6000,
    requestsPerSecond: 2000,
    latencyMs: { p50: 1.5, p90: 4, p99: 14, max: 40 },
    statuses: { '2xx': 5990, '3xx': 0, '4xx': 0, '5xx': 10 },
    statusCodes: { '200': 5990, '502': 10 },
    errors: 0,
    timeouts: 0,
    hitRatio: 0.97,
    coalescedWaits: 3,
    upstreamRequests: 15,
    upstreamRefusals: 0,
    redisErrors: 0,
    sandboxServed: 15,
    timeline: [second(1, 0.9), second(2, undefined), second(3, 0.99)],
  },
};

const group = (answers: number, stale: number, p99Ms: number): GroupFreshness => ({
  answers,
  stale,
  p50Ms: 0,
  p99Ms,
  maxMs: p99Ms,
});

function freshnessRun(variant: LoadtestFreshnessRun['variant'], stale: number, p99Ms: number): LoadtestFreshnessRun {
  return {
    workload: variant === 'still' ? 'append' : 'mixed',
    variant,
    okPerMinute: 570,
    listLatency: { answers: 1000, p50Ms: 1.25, p99Ms: 8 },
    deepListLatency:
      variant === 'still' ? { answers: 600, p50Ms: 1.5, p99Ms: 9.5 } : { answers: 0, p50Ms: 0, p99Ms: 0 },
    answers: 3000,
    staleShare: stale / 3000,
    p99Ms,
    upstreamPerMinute: 600,
    notModifiedPerMinute: 30,
    upstreamKbPerMinute: 1200,
    byResource: { receipts: group(1000, stale / 2, p99Ms), [HOSTILE]: group(2000, stale / 2, p99Ms) },
    pageChangesPerMinute: 3900,
    pages: 208,
    staleByPath: {},
    byReplica: { proxy1: group(1500, stale / 2, p99Ms), proxy2: group(1500, stale / 2, p99Ms) },
    ...(variant === 'invalidated' && { webhook: { delivered: 1200, dropped: 0 } }),
  };
}

const freshness: LoadtestFreshness = {
  seconds: 20,
  perSecond: 200,
  replicas: 2,
  webhookReplica: 'proxy1',
  runs: [freshnessRun('fixed', 900, 18_000), freshnessRun('invalidated', 0, 600), freshnessRun('still', 0, 0)],
};

describe('the load test report', () => {
  const html = renderLoadtestHtml(report);

  it('draws each second as a point of each series, and a second without a hit ratio as a gap', () => {
    const points = (series: string): string | undefined =>
      new RegExp(`data-series="${series}" data-points="(\\d+)"`).exec(html)?.[1];
    for (const series of ['p50', 'p90', 'p99', 'req/s', 'upstream calls', 'errors'])
      expect(points(series), series).toBe('3');
    expect(points('hit ratio')).toBe('2');
    for (const chart of ['topology', 'latency', 'throughput', 'hit-ratio', 'upstream', 'statuses'])
      expect(html).toContain(`data-chart="${chart}"`);
    expect(html.match(/<rect class="bar"/g)).toHaveLength(2);
    expect(html.match(/<g class="node replica"/g)).toHaveLength(3);
  });

  it('escapes the text it shows and fetches nothing', () => {
    expect(html).not.toContain('<script');
    expect(html).toContain('&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &quot;quoted&quot;');
    expect(html).not.toMatch(/<(link|img|iframe|object|embed)\b/i);
    expect(html).not.toMatch(/\b(src|href)=/i);
    expect(html).not.toMatch(/url\((?!#)/);
  });

  it('gives docs/load-test.md its stamp and a table of the totals', () => {
    const lines = loadtestMarkdown(report);
    expect(lines[0]).toBe(report.stamp);
    expect(lines).toContain('| figure | this run |');
    expect(lines).toContain('| requests | 6,000 (2,000 req/s) |');
    expect(lines).toContain('| statuses | 5,990 × 200, 10 × 502 |');
    expect(lines).toContain('| upstream requests | 15 (5.0/s); the sandbox served 15 |');
  });

  it('leaves the freshness section out when the phase did not run', () => {
    expect(html).not.toContain('<h2>Freshness</h2>');
    expect(loadtestMarkdown(report).join('\n')).not.toContain('Freshness');
  });

  it("adds the freshness figures: a row a workload's run, staleness by replica, and by resource in the page", () => {
    const withFreshness: LoadtestReport = { ...report, freshness };
    const lines = loadtestMarkdown(withFreshness);
    expect(lines).toContain(
      '| run | answers | stale | staleness p99 | upstream req/min | 200s/min | 304s/min | list p50 | list p99 | deep p99 |',
    );
    expect(lines).toContain(
      '| mixed: fixed (TTLs alone) | 3,000 | 30.0% | 18.0 s | 600 | 570 | 30 | 1.3 | 8.0 | n/a |',
    );
    expect(lines).toContain(
      '| mixed: invalidated (webhook to proxy1) | 3,000 | 0.0% | 0.6 s | 600 | 570 | 30 | 1.3 | 8.0 | n/a |',
    );
    expect(lines).toContain(
      '| append: still (nothing changing) | 3,000 | 0.0% | 0.0 s | 600 | 570 | 30 | 1.3 | 8.0 | 9.5 |',
    );
    expect(lines).toContain(
      '| proxy1 (takes the webhook) | 1,500 | 30.0% | 18.0 s | 1,500 | 0.0% | 0.6 s | 1,500 | 0.0% | 0.0 s |',
    );
    expect(lines).toContain('| proxy2 | 1,500 | 30.0% | 18.0 s | 1,500 | 0.0% | 0.6 s | 1,500 | 0.0% | 0.0 s |');
    expect(lines).toContain('The webhook: 1,200 changes delivered to proxy1, 0 dropped.');
    const page = renderLoadtestHtml(withFreshness);
    for (const id of ['freshness', 'freshness-replicas', 'freshness-resources'])
      expect(page).toContain(`<table class="numbers" id="${id}">`);
    expect(page).toContain('<th>receipts</th>');
    expect(page).not.toContain('<script');
  });
});
