/**
 * `npm run loadtest` (its compiled script; the suite's setup builds it): the docker-compose
 * topology as local processes — Redis (one server, or a real 6-node Redis Cluster), the sandbox,
 * proxy replicas, the balancer — under a short load. It must finish with exit code 0, every
 * request answered, a line per second, figures that agree with each other (the replicas' upstream
 * calls are exactly what the sandbox served), the lines for docs/load-test.md, and a JSON and HTML
 * report whose charts a real browser draws. The run on one Redis has a short freshness phase too:
 * both variants, every replica's answers judged, the webhook's changes all delivered.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';
import type { LoadtestResult } from '../../bench/loadgen.js';
import type { LoadtestReport } from '../../bench/loadtest-report.js';
import { withChromiumPage } from '../helpers/chromium.js';
import { runNode } from '../helpers/process.js';

/** The keyset walkers of the run (LOADTEST_WALKERS). */
const WALKERS = 3;
const reportDirs: string[] = [];
afterAll(() => {
  for (const dir of reportDirs) rmSync(dir, { recursive: true, force: true });
});

interface Run {
  readonly stdout: string;
  readonly result: LoadtestResult & { readonly redis: string; readonly report: string };
  readonly report: LoadtestReport;
  readonly html: string;
}

async function loadtest(env: Record<string, string>): Promise<Run> {
  const dir = mkdtempSync(join(tmpdir(), 'slab-loadtest-'));
  reportDirs.push(dir);
  const run = runNode('dist-bench/bench/loadtest.js', { LOADTEST_REPORT_DIR: dir, ...env });
  const exitCode = await run.exited;
  expect(exitCode, run.stderr()).toBe(0);
  const line = run
    .stdout()
    .split('\n')
    .find((l) => l.startsWith('LOADTEST_RESULT '));
  expect(line, run.stdout()).toBeDefined();
  const result = JSON.parse(line?.slice('LOADTEST_RESULT '.length) ?? '{}') as Run['result'];
  expect(existsSync(result.report)).toBe(true);
  const json = result.report.replace(/\.html$/, '.json');
  const report = JSON.parse(readFileSync(json, 'utf8')) as LoadtestReport;
  return { stdout: run.stdout(), result, report, html: result.report };
}

/** One run on one Redis, looked at by the first two tests (the suite stays a few seconds long). */
let single: Promise<Run> | undefined;
const singleRun = (): Promise<Run> =>
  (single ??= loadtest({
    LOADTEST_SECONDS: '2',
    LOADTEST_REPLICAS: '2',
    LOADTEST_CONNECTIONS: '8',
    LOADTEST_WALKERS: String(WALKERS),
    LOADTEST_WALKER_THINK_MS: '10',
    LOADTEST_FRESHNESS_SECONDS: '2',
    LOADTEST_FRESHNESS_WORKLOADS: 'mixed,move',
  }));

describe('npm run loadtest', () => {
  it('runs the topology on one Redis, prints a line per second and figures that add up, and writes the lines for docs/load-test.md and a report', async () => {
    const { stdout, result, report } = await singleRun();
    expect(result.requests).toBeGreaterThan(0);
    expect(result.errors).toBe(0);
    expect(result.statuses['2xx']).toBe(result.requests);
    expect(result.statusCodes['200']).toBe(result.requests);
    expect(result.hitRatio).toBeGreaterThan(0);
    expect(result.upstreamRequests).toBeGreaterThan(0);
    expect(result.sandboxServed).toBe(result.upstreamRequests);
    expect(result.redisErrors).toBe(0);
    // The keyset walkers: walks completed to the end, and what was fetched ahead of them reported.
    // Whether a page fetched ahead is used in two seconds is chance: the readers' cold start keeps
    // the upstream budget's line full (prefetches are refused then, by design) while the walkers
    // make their one uncached walk. That pages fetched ahead are used, whichever replica takes them,
    // is test/system/prefetch-replicas.test.ts.
    expect(result.walks?.walks).toBeGreaterThan(0);
    expect(result.walks?.failures).toBe(0);
    // The walks met the prefetcher: pages fetched ahead, or skipped for a reason it counts. Not one
    // decision per walk: a page already walked past once starts no walk ahead again
    // (src/cache/prefetch/prefetcher.ts), so later walks over the same pages decide nothing.
    const prefetches = result.prefetches ?? {};
    const decided = ['started', 'cached', 'filling', 'leased', 'cap', 'budget'].reduce(
      (sum, reason) => sum + (prefetches[reason] ?? 0),
      0,
    );
    expect(decided).toBeGreaterThan(0);
    expect(stdout).toMatch(/keyset walks +\d+ by 3 walkers/);
    // The printed line is the replicas' counters.
    const started = prefetches.started ?? 0;
    const used = prefetches.used ?? 0;
    const wasted = prefetches.wasted ?? 0;
    expect(stdout).toMatch(
      new RegExp(
        `prefetches +${String(started)} started, ${String(used)} used, ${String(wasted)} wasted, ${String(Math.max(0, started - used - wasted))} not taken yet`,
      ),
    );
    expect(result.redis).toBe('single');

    // A line per second, and the timeline behind the charts adds up to the totals.
    const seconds = stdout
      .split('\n')
      .filter((l) =>
        /^ {2}t= +[\d.]+ s +[\d,]+ req\/s {2}p50 [\d.]+ ms {2}p99 [\d.]+ ms {2}errors \d+ {2}hit [\d.]+% {2}upstream \d+$/.test(
          l,
        ),
      );
    expect(seconds.length).toBeGreaterThanOrEqual(2);
    expect(result.timeline).toHaveLength(seconds.length);
    expect(result.timeline.reduce((sum, s) => sum + s.requests, 0)).toBe(result.requests);
    expect(result.timeline.reduce((sum, s) => sum + s.upstreamRequests, 0)).toBeLessThanOrEqual(
      result.upstreamRequests,
    );

    expect(stdout).toMatch(
      /topology: redis redis-server \S+, one node \(REDIS_URL=redis:\/\/127\.0\.0\.1:\d+\), sandbox http:\/\/127\.0\.0\.1:\d+, 2 replicas/,
    );
    expect(stdout).toMatch(/latency p50 \/ p90 \/ p99 \/ max/);
    // The lines for docs/load-test.md: the stamp, then the table.
    expect(stdout).toMatch(
      /^`npm run loadtest`, \d{4}-\d{2}-\d{2}, \d+ cores?, 2 replicas, one Redis, 2 s, 8 connections$/m,
    );
    expect(stdout).toMatch(/^\| requests \| [\d,]+ \([\d,]+ req\/s\) \|$/m);

    expect(report.topology.redis.mode).toBe('single');
    expect(report.topology.replicas).toHaveLength(2);
    expect(report.result.requests).toBe(result.requests);

    // The freshness phase: each variant read through the balancer, each answer by the replica that gave it.
    const runs = report.freshness?.runs ?? [];
    expect(runs.map((run) => `${run.workload} ${run.variant}`)).toEqual([
      'mixed fixed',
      'mixed invalidated',
      'move still',
      'move fixed',
      'move invalidated',
    ]);
    // The log's pages are read deep: past the first page of each list.
    for (const run of runs.slice(2)) expect(run.deepListLatency.answers).toBeGreaterThan(0);
    for (const run of runs) {
      expect(run.answers).toBeGreaterThan(0);
      expect(Object.keys(run.byReplica)).toEqual(['proxy1', 'proxy2']);
      for (const replica of Object.values(run.byReplica)) expect(replica.answers).toBeGreaterThan(0);
    }
    for (const run of runs.filter((r) => r.variant === 'invalidated')) expect(run.webhook?.dropped).toBe(0);
    expect(report.freshness?.webhookReplica).toBe('proxy1');
    expect(stdout).toMatch(/^\| mixed: invalidated \(webhook to proxy1\) \| [\d,]+ \| [\d.]+% \| /m);
    expect(stdout).toMatch(/^\| proxy2 \| /m);
  }, 45_000);

  it('writes an HTML report that Chromium draws: topology, latency, throughput, hit ratio, upstream calls, statuses, with nothing fetched', async () => {
    const { result, report, html } = await singleRun();
    const url = pathToFileURL(html).href;
    const seen = await withChromiumPage(async (page) => {
      const requested: string[] = [];
      const problems: string[] = [];
      page.on('request', (request) => requested.push(request.url()));
      page.on('pageerror', (error) => problems.push(error.message));
      page.on('console', (message) => {
        if (message.type() === 'error') problems.push(message.text());
      });
      await page.goto(url);
      const charts: Record<string, { width: number; height: number }> = {};
      for (const id of ['topology', 'latency', 'throughput', 'hit-ratio', 'upstream', 'statuses']) {
        const box = await page.locator(`figure[data-chart="${id}"] svg`).boundingBox();
        charts[id] = { width: box?.width ?? 0, height: box?.height ?? 0 };
      }
      const lines: { chart: string; series: string; points: string | null; width: number }[] = [];
      for (const chart of ['latency', 'throughput', 'hit-ratio', 'upstream']) {
        const polylines = page.locator(`figure[data-chart="${chart}"] polyline.series`);
        for (let i = 0; i < (await polylines.count()); i++) {
          const line = polylines.nth(i);
          lines.push({
            chart,
            series: (await line.getAttribute('data-series')) ?? '',
            points: await line.getAttribute('data-points'),
            width: (await line.boundingBox())?.width ?? 0,
          });
        }
      }
      const bars = await page.locator('figure[data-chart="statuses"] rect.bar').count();
      const barWidth = (await page.locator('figure[data-chart="statuses"] rect.bar').first().boundingBox())?.width ?? 0;
      const nodes = await page.locator('figure[data-chart="topology"] g.node').count();
      const redisBox = (await page.locator('figure[data-chart="topology"] g.redis').textContent()) ?? '';
      return { requested, problems, charts, lines, bars, barWidth, nodes, redisBox, title: await page.title() };
    });

    expect(seen.problems).toEqual([]);
    // Self-contained: the browser asked for the file itself and nothing else.
    expect(seen.requested).toEqual([url]);
    expect(seen.title).toContain('load test');
    for (const [id, box] of Object.entries(seen.charts)) {
      expect(box.width, id).toBeGreaterThan(300);
      expect(box.height, id).toBeGreaterThan(50);
    }
    expect(seen.lines.map((l) => `${l.chart}/${l.series}`)).toEqual([
      'latency/p50',
      'latency/p90',
      'latency/p99',
      'throughput/req/s',
      'hit-ratio/hit ratio',
      'upstream/upstream calls',
      'upstream/errors',
    ]);
    for (const line of seen.lines) {
      // Every second of the run is a point, and the line spans them.
      if (line.series !== 'hit ratio')
        expect(line.points, `${line.chart}/${line.series}`).toBe(String(result.timeline.length));
      expect(line.width, `${line.chart}/${line.series}`).toBeGreaterThan(100);
    }
    expect(seen.bars).toBe(Object.keys(result.statusCodes).length);
    expect(seen.barWidth).toBeGreaterThan(100);
    // Generator, balancer, two replicas, Redis, the sandbox.
    expect(seen.nodes).toBe(6);
    expect(seen.redisBox).toContain('Redis');
    expect(report.settings.redis).toBe('single');
  }, 45_000);

  it('runs on a real Redis Cluster with LOADTEST_REDIS=cluster, and says so', async () => {
    const { stdout, result, report } = await loadtest({
      LOADTEST_REDIS: 'cluster',
      LOADTEST_SECONDS: '1',
      LOADTEST_REPLICAS: '1',
      LOADTEST_CONNECTIONS: '4',
      LOADTEST_FRESHNESS_SECONDS: '0',
    });
    expect(stdout).toMatch(
      /topology: redis Redis Cluster of 6 redis-server \S+ nodes \(3 masters, 3 replicas\) \(REDIS_CLUSTER_NODES=(127\.0\.0\.1:\d+,){5}127\.0\.0\.1:\d+\)/,
    );
    expect(stdout).toMatch(
      /^`npm run loadtest`, \d{4}-\d{2}-\d{2}, \d+ cores?, 1 replica, Redis Cluster, 1 s, 4 connections$/m,
    );
    expect(result.redis).toBe('cluster');
    expect(result.requests).toBeGreaterThan(0);
    expect(result.errors).toBe(0);
    expect(result.statuses['2xx']).toBe(result.requests);
    expect(result.sandboxServed).toBe(result.upstreamRequests);
    expect(report.topology.redis.mode).toBe('cluster');
    expect(report.topology.redis.nodes).toHaveLength(6);
    expect(report.freshness).toBeUndefined();
  });
});
