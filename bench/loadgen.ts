/**
 * The load generator of the load test: the `loadgen` service of `docker-compose.yml` (profile
 * `load`) and the last step of `npm run loadtest`. Readers of every sandbox company, four
 * credentials each, ask for the thirteen resources with a few page sizes and cursors (popular
 * pages more often than others, as real readers do), through the load balancer, for a while.
 *
 * Every second it prints a line — req/s, p50, p99, errors, the hit ratio and the upstream calls
 * of that second (the last two from the replicas' `/metrics`) — and keeps it for the report's
 * charts. At the end: throughput, latency percentiles and statuses (every answer timed, at 1 µs),
 * and the hit ratio, coalesced waits, upstream calls and Redis errors summed over the replicas'
 * `/metrics` (the difference over the run), and the requests the sandbox served.
 *
 * As a process: `node dist-bench/bench/loadgen.js`, with TARGET_URL (the balancer), ADMIN_URLS
 * (`http://replica:9090,…`, for `/metrics`), SANDBOX_URL (its `/__sandbox/stats`, when it runs
 * with SANDBOX_CONTROL=1), JWT_SECRET (the key the replicas verify with), LOADTEST_SECONDS (10),
 * LOADTEST_CONNECTIONS (32), LOADTEST_WALKERS (0: keyset walkers beside the readers, walking
 * movements to the end, bench/lib/load/walkers.ts) and LOADTEST_WALKER_THINK_MS (100). The last
 * line is `LOADTEST_RESULT {json}` for machines.
 */
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { API_PREFIX, RESOURCE_NAMES } from '../src/catalog/resources.js';
import { mintDevToken } from '../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../src/sandbox/dataset.js';
import { envInt, envText } from './lib/env.js';
import { fmt, fmtInt } from './lib/format.js';
import { sandboxStats } from './lib/http.js';
import { runWalkers, type WalkFigures } from './lib/load/walkers.js';
import { LatencyHistogram } from './lib/stats.js';
import { zipfPicker } from './lib/zipf.js';

export interface LoadOptions {
  readonly targetUrl: string;
  readonly adminUrls: readonly string[];
  readonly sandboxUrl: string | undefined;
  readonly secret: string;
  readonly seconds: number;
  readonly connections: number;
  /** Keyset walkers beside the readers (LOADTEST_WALKERS, 0: none), and what each spends on a page, ms. */
  readonly walkers?: number;
  readonly walkerThinkMs?: number;
  readonly write?: (line: string) => void;
}

/** One second of the run, as the per-second line shows it. */
export interface SecondSample {
  /** Seconds since the load started, at the end of this interval. */
  readonly at: number;
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
  readonly statuses: Readonly<Record<string, number>>;
  /** (hit + stale) / answers with a cache result, over the replicas, in this interval. */
  readonly hitRatio: number | undefined;
  readonly upstreamRequests: number;
}

export interface LoadtestResult {
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number };
  /** By class: 2xx, 3xx, 4xx, 5xx. */
  readonly statuses: Readonly<Record<string, number>>;
  /** By status code. */
  readonly statusCodes: Readonly<Record<string, number>>;
  readonly errors: number;
  readonly timeouts: number;
  /** Over the replicas' answers to reads: (hit + stale) / all with a cache result. */
  readonly hitRatio: number | undefined;
  readonly coalescedWaits: number;
  readonly upstreamRequests: number;
  readonly upstreamRefusals: number;
  readonly redisErrors: number;
  /** What the sandbox served during the run, when its counters are reachable. */
  readonly sandboxServed: number | undefined;
  readonly timeline: readonly SecondSample[];
  /** The keyset walkers' figures (with walkers), and the replicas' prefetches by result over the run (when any). */
  readonly walks?: WalkFigures;
  readonly prefetches?: Readonly<Record<string, number>>;
}

/** What the walkers walk: the sandbox's one large collection is company 1's; the others are a few pages each. */
const WALKED_RESOURCE = 'movements';
const WALK_PAGE_SIZE = 10;

const PAGE_SIZES = [5, 10, 20, 50];
const CURSORS = [undefined, 10, 40];
const CREDENTIALS_PER_COMPANY = 4;

/** Sums of the replicas' counters that the report needs, by series. */
type Totals = Map<string, number>;

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

async function scrape(adminUrls: readonly string[]): Promise<Totals> {
  const totals: Totals = new Map();
  for (const url of adminUrls) {
    const res = await fetch(`${url}/metrics`);
    if (!res.ok) throw new Error(`${url}/metrics answered ${String(res.status)}`);
    addSeries(await res.text(), totals);
  }
  return totals;
}

function sum(before: Totals, after: Totals, match: (series: string) => boolean): number {
  let total = 0;
  for (const [series, value] of after) if (match(series)) total += value - (before.get(series) ?? 0);
  return total;
}

const isUpstreamSeries = (series: string): boolean => series.startsWith('slab_proxy_upstream_requests_total');

function hitRatioBetween(before: Totals, after: Totals): number | undefined {
  const byCache = (cache: string): number =>
    sum(before, after, (s) => s.startsWith('slab_proxy_requests_total{') && s.includes(`cache="${cache}"`));
  const withCache = ['hit', 'stale', 'miss', 'collapsed'].reduce((total, cache) => total + byCache(cache), 0);
  return withCache === 0 ? undefined : (byCache('hit') + byCache('stale')) / withCache;
}

/** The sandbox's counters, or undefined when they are off (SANDBOX_CONTROL unset) or unreachable. */
async function sandboxCounts(
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
async function settledCounts(
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

/** Every read the readers make; earlier entries are the popular ones. */
function readTargets(): string[] {
  const targets: string[] = [];
  for (const perPage of PAGE_SIZES) {
    for (const cursor of CURSORS) {
      for (const resource of RESOURCE_NAMES) {
        targets.push(
          `${API_PREFIX}/${resource}?per_page=${String(perPage)}${cursor === undefined ? '' : `&after_id=${String(cursor)}`}`,
        );
      }
    }
  }
  return targets;
}

/** The answers of one second as they arrive. */
interface Interval {
  readonly histogram: LatencyHistogram;
  readonly statuses: Record<string, number>;
  readonly startedAt: number;
  errors: number;
}

function newInterval(): Interval {
  return { histogram: new LatencyHistogram(), statuses: {}, startedAt: performance.now(), errors: 0 };
}

const statusClass = (code: number): string => `${String(Math.floor(code / 100))}xx`;

/** e.g. "t=  3.0 s    3,210 req/s  p50 4.10 ms  p99 35.20 ms  errors 0  hit 97.3%  upstream 12". */
export function formatSecond(sample: SecondSample): string {
  return (
    `  t=${fmt(sample.at, 1).padStart(5)} s  ${fmtInt(sample.requestsPerSecond).padStart(7)} req/s  p50 ${fmt(sample.p50Ms)} ms  p99 ${fmt(sample.p99Ms)} ms  ` +
    `errors ${String(sample.errors)}  hit ${sample.hitRatio === undefined ? 'n/a' : `${(sample.hitRatio * 100).toFixed(1)}%`}  upstream ${String(sample.upstreamRequests)}`
  );
}

export async function runLoad(options: LoadOptions): Promise<LoadtestResult> {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const tokens: string[] = [];
  for (const company of SANDBOX_COMPANIES) {
    for (let n = 0; n < CREDENTIALS_PER_COMPANY; n++)
      tokens.push(
        await mintDevToken({ company, subject: `load-${String(company)}-${String(n)}`, secret: options.secret }),
      );
  }
  const targets = readTargets();
  const pick = zipfPicker(targets.length);
  const before = await scrape(options.adminUrls);
  const servedBefore = (await sandboxCounts(options.sandboxUrl))?.served;

  write(
    `load: ${String(options.connections)} connections for ${String(options.seconds)} s against ${options.targetUrl} (${String(tokens.length)} credentials, ${String(targets.length)} pages per company)`,
  );
  const overall = new LatencyHistogram();
  const statusCodes: Record<string, number> = {};
  let second = newInterval();
  const timeline: SecondSample[] = [];
  const startedAt = performance.now();
  let previousTotals = before;
  let samples = Promise.resolve();

  /**
   * Closes the current interval: client figures now, server figures from a scrape (in order).
   * The run's last, partial interval counts only if answers arrived in it.
   */
  const closeSecond = (last: boolean): void => {
    const closing = second;
    second = newInterval();
    const now = second.startedAt;
    const intervalSec = (now - closing.startedAt) / 1000;
    if (last && closing.histogram.count === 0) return;
    samples = samples.then(async () => {
      const totals = await scrape(options.adminUrls).catch(() => previousTotals);
      const sample: SecondSample = {
        at: (now - startedAt) / 1000,
        requests: closing.histogram.count,
        requestsPerSecond: closing.histogram.count / intervalSec,
        p50Ms: closing.histogram.percentileMs(50),
        p90Ms: closing.histogram.percentileMs(90),
        p99Ms: closing.histogram.percentileMs(99),
        maxMs: closing.histogram.maxMs,
        errors: closing.errors,
        statuses: closing.statuses,
        hitRatio: hitRatioBetween(previousTotals, totals),
        upstreamRequests: sum(previousTotals, totals, isUpstreamSeries),
      };
      previousTotals = totals;
      timeline.push(sample);
      write(formatSecond(sample));
    });
  };

  const ticker = setInterval(() => closeSecond(false), 1000);
  const walkers = options.walkers ?? 0;
  const walking =
    walkers === 0
      ? Promise.resolve(undefined)
      : runWalkers({
          targetUrl: options.targetUrl,
          // A walker a company, the large collection's company last (its walk is the longest).
          tokens: [...tokens.slice(CREDENTIALS_PER_COMPANY), ...tokens.slice(0, CREDENTIALS_PER_COMPANY)].filter(
            (_, i) => i % CREDENTIALS_PER_COMPANY === 0,
          ),
          walkers,
          thinkMs: options.walkerThinkMs ?? 100,
          resource: WALKED_RESOURCE,
          perPage: WALK_PAGE_SIZE,
          untilMs: performance.now() + options.seconds * 1000,
        });
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: options.targetUrl,
        connections: options.connections,
        duration: options.seconds,
        requests: [
          {
            method: 'GET',
            setupRequest: (request) => ({
              ...request,
              path: targets[pick()] ?? targets[0] ?? '/',
              headers: {
                ...request.headers,
                authorization: `Bearer ${tokens[Math.floor(Math.random() * tokens.length)] ?? ''}`,
              },
            }),
          },
        ],
      },
      (error: unknown, done: autocannon.Result) =>
        error === null || error === undefined
          ? resolve(done)
          : reject(error instanceof Error ? error : new Error(String(error))),
    );
    instance.on('response', (_client, statusCode, _bytes, responseTime) => {
      overall.record(responseTime);
      second.histogram.record(responseTime);
      const code = String(statusCode);
      statusCodes[code] = (statusCodes[code] ?? 0) + 1;
      second.statuses[code] = (second.statuses[code] ?? 0) + 1;
    });
    instance.on('reqError', () => {
      second.errors += 1;
    });
  });
  const walks = await walking;
  clearInterval(ticker);
  closeSecond(true);
  await samples;

  const { after, served } = await settledCounts(options, before, servedBefore);
  const statuses: Record<string, number> = { '2xx': 0, '3xx': 0, '4xx': 0, '5xx': 0 };
  for (const [code, n] of Object.entries(statusCodes))
    statuses[statusClass(Number(code))] = (statuses[statusClass(Number(code))] ?? 0) + n;
  return {
    requests: overall.count,
    requestsPerSecond: overall.count / result.duration,
    latencyMs: {
      p50: overall.percentileMs(50),
      p90: overall.percentileMs(90),
      p99: overall.percentileMs(99),
      max: overall.maxMs,
    },
    statuses,
    statusCodes,
    errors: result.errors,
    timeouts: result.timeouts,
    hitRatio: hitRatioBetween(before, after),
    coalescedWaits: sum(before, after, (s) => s.startsWith('slab_proxy_coalesced_waits_total')),
    upstreamRequests: sum(before, after, isUpstreamSeries),
    upstreamRefusals: sum(before, after, (s) => s.startsWith('slab_proxy_upstream_refusals_total')),
    redisErrors: sum(before, after, (s) => s.startsWith('slab_proxy_redis_errors_total')),
    sandboxServed: served,
    timeline,
    ...(walks !== undefined && { walks }),
    ...prefetchesIfAny(prefetchesBetween(before, after)),
  };
}

/** The prefetches, when any was started or skipped (prefetch is on for some resource). */
function prefetchesIfAny(prefetches: Record<string, number>): { prefetches?: Record<string, number> } {
  return Object.values(prefetches).some((n) => n > 0) ? { prefetches } : {};
}

/** The replicas' prefetches over the run, by result. */
function prefetchesBetween(before: Totals, after: Totals): Record<string, number> {
  const byResult: Record<string, number> = {};
  for (const series of after.keys()) {
    const result = /^slab_proxy_prefetches_total\{result="([a-z]+)"\}/.exec(series)?.[1];
    if (result !== undefined) byResult[result] = sum(before, after, (s) => s === series);
  }
  return byResult;
}

export function formatReport(result: LoadtestResult, seconds: number): string {
  const percent = (ratio: number | undefined): string => (ratio === undefined ? 'n/a' : `${(ratio * 100).toFixed(1)}%`);
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
    ['hit ratio (hit + stale)', percent(result.hitRatio)],
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

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const required = (name: string): string => {
    const value = envText(name);
    if (value === undefined) throw new TypeError(`${name} is required`);
    return value;
  };
  const seconds = envInt('LOADTEST_SECONDS', 10, 1, 86_400);
  runLoad({
    targetUrl: required('TARGET_URL'),
    adminUrls: required('ADMIN_URLS')
      .split(',')
      .map((u) => u.trim())
      .filter((u) => u !== ''),
    sandboxUrl: envText('SANDBOX_URL'),
    secret: required('JWT_SECRET'),
    seconds,
    connections: envInt('LOADTEST_CONNECTIONS', 32, 1, 10_000),
    walkers: envInt('LOADTEST_WALKERS', 0, 0, 1_000),
    walkerThinkMs: envInt('LOADTEST_WALKER_THINK_MS', 100, 0, 60_000),
  }).then(
    (result) => {
      printReport(result, seconds);
    },
    (error: unknown) => {
      process.stderr.write(`loadgen: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
