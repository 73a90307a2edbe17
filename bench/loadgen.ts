/**
 * The load generator of the load test (DESIGN §10): the `loadgen` service of `docker-compose.yml`
 * (profile `load`) and the last step of `npm run loadtest`. Readers of every sandbox company, four
 * credentials each, ask for the thirteen resources with a few page sizes and cursors (popular
 * pages more often than others, as real readers do), through the load balancer, for a while. Then
 * it prints throughput, latency percentiles and statuses (from autocannon), and the hit ratio,
 * coalesced waits, upstream calls and Redis errors summed over the replicas' `/metrics` (the
 * difference over the run), and the requests the sandbox served.
 *
 * As a process: `node dist-bench/bench/loadgen.js`, with TARGET_URL (the balancer), ADMIN_URLS
 * (`http://replica:9090,…`, for `/metrics`), SANDBOX_URL (its `/__sandbox/stats`, when it runs
 * with SANDBOX_CONTROL=1), JWT_SECRET (the key the replicas verify with), LOADTEST_SECONDS (10),
 * LOADTEST_CONNECTIONS (32). The last line is `LOADTEST_RESULT {json}` for machines.
 */
import { fileURLToPath } from 'node:url';
import autocannon from 'autocannon';
import { API_PREFIX, RESOURCE_NAMES } from '../src/catalog/resources.js';
import { mintDevToken } from '../src/dev/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../src/sandbox/dataset.js';

export interface LoadOptions {
  readonly targetUrl: string;
  readonly adminUrls: readonly string[];
  readonly sandboxUrl: string | undefined;
  readonly secret: string;
  readonly seconds: number;
  readonly connections: number;
  readonly write?: (line: string) => void;
}

export interface LoadResult {
  readonly requests: number;
  readonly requestsPerSecond: number;
  readonly latencyMs: { readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number };
  readonly statuses: Record<string, number>;
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
}

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
    if (!/^slab_proxy_(requests_total|coalesced_waits_total|upstream_requests_total|upstream_refusals_total|redis_errors_total)\b/.test(series)) continue;
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

interface SandboxCounts {
  readonly served: number;
  readonly inFlight: number;
}

async function sandboxCounts(sandboxUrl: string | undefined): Promise<SandboxCounts | undefined> {
  if (sandboxUrl === undefined) return undefined;
  try {
    const res = await fetch(`${sandboxUrl}/__sandbox/stats`);
    if (!res.ok) return undefined;
    const stats = (await res.json()) as { served?: unknown; inFlight?: unknown };
    return typeof stats.served === 'number' && typeof stats.inFlight === 'number' ? { served: stats.served, inFlight: stats.inFlight } : undefined;
  } catch {
    return undefined; // counters off (SANDBOX_CONTROL unset): the report says so
  }
}

const isUpstreamSeries = (series: string): boolean => series.startsWith('slab_proxy_upstream_requests_total');

/**
 * The counters once the run's last fills are over: when the load stops, background refreshes and
 * fills may still be at the upstream, counted by the sandbox on arrival and by the replicas on the
 * answer. Read until the sandbox is idle and both agree (or the counts stop moving), for 2 s at most.
 */
async function settledCounts(options: LoadOptions, before: Totals, servedBefore: number | undefined): Promise<{ after: Totals; served: number | undefined }> {
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
        targets.push(`${API_PREFIX}/${resource}?per_page=${String(perPage)}${cursor === undefined ? '' : `&after_id=${String(cursor)}`}`);
      }
    }
  }
  return targets;
}

/** A skewed pick: index i with probability ∝ 1 / (i + 1) (Zipf, s = 1). */
function zipfPicker(count: number): () => number {
  const cumulative: number[] = [];
  let total = 0;
  for (let i = 0; i < count; i++) cumulative.push((total += 1 / (i + 1)));
  return () => {
    const x = Math.random() * total;
    let low = 0;
    let high = count - 1;
    while (low < high) {
      const mid = (low + high) >> 1;
      if ((cumulative[mid] ?? total) < x) low = mid + 1;
      else high = mid;
    }
    return low;
  };
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const tokens: string[] = [];
  for (const company of SANDBOX_COMPANIES) {
    for (let n = 0; n < CREDENTIALS_PER_COMPANY; n++) tokens.push(await mintDevToken({ company, subject: `load-${String(company)}-${String(n)}`, secret: options.secret }));
  }
  const targets = readTargets();
  const pick = zipfPicker(targets.length);
  const before = await scrape(options.adminUrls);
  const servedBefore = (await sandboxCounts(options.sandboxUrl))?.served;

  write(`load: ${String(options.connections)} connections for ${String(options.seconds)} s against ${options.targetUrl} (${String(tokens.length)} credentials, ${String(targets.length)} pages per company)`);
  const result = await autocannon({
    url: options.targetUrl,
    connections: options.connections,
    duration: options.seconds,
    requests: [
      {
        method: 'GET',
        setupRequest: (request) => ({
          ...request,
          path: targets[pick()] ?? targets[0] ?? '/',
          headers: { ...request.headers, authorization: `Bearer ${tokens[Math.floor(Math.random() * tokens.length)] ?? ''}` },
        }),
      },
    ],
  });

  const { after, served } = await settledCounts(options, before, servedBefore);
  const byCache = (cache: string): number => sum(before, after, (s) => s.startsWith('slab_proxy_requests_total{') && s.includes(`cache="${cache}"`));
  const withCache = ['hit', 'stale', 'miss', 'collapsed'].reduce((total, cache) => total + byCache(cache), 0);
  const statuses: Record<string, number> = {
    '2xx': result['2xx'],
    '3xx': result['3xx'],
    '4xx': result['4xx'],
    '5xx': result['5xx'],
  };
  return {
    requests: result.requests.total,
    requestsPerSecond: result.requests.average,
    latencyMs: { p50: result.latency.p50, p90: result.latency.p90, p99: result.latency.p99, max: result.latency.max },
    statuses,
    errors: result.errors,
    timeouts: result.timeouts,
    hitRatio: withCache === 0 ? undefined : (byCache('hit') + byCache('stale')) / withCache,
    coalescedWaits: sum(before, after, (s) => s.startsWith('slab_proxy_coalesced_waits_total')),
    upstreamRequests: sum(before, after, isUpstreamSeries),
    upstreamRefusals: sum(before, after, (s) => s.startsWith('slab_proxy_upstream_refusals_total')),
    redisErrors: sum(before, after, (s) => s.startsWith('slab_proxy_redis_errors_total')),
    sandboxServed: served,
  };
}

export function formatReport(result: LoadResult, seconds: number): string {
  const percent = (ratio: number | undefined): string => (ratio === undefined ? 'n/a' : `${(ratio * 100).toFixed(1)}%`);
  const rows: [string, string][] = [
    ['requests', `${String(result.requests)} (${result.requestsPerSecond.toFixed(0)} req/s)`],
    ['latency p50 / p90 / p99 / max', `${String(result.latencyMs.p50)} / ${String(result.latencyMs.p90)} / ${String(result.latencyMs.p99)} / ${String(result.latencyMs.max)} ms`],
    ['statuses', Object.entries(result.statuses).map(([k, v]) => `${k} ${String(v)}`).join(', ')],
    ['connection errors / timeouts', `${String(result.errors)} / ${String(result.timeouts)}`],
    ['hit ratio (hit + stale)', percent(result.hitRatio)],
    ['coalesced waits', String(result.coalescedWaits)],
    ['upstream requests', `${String(result.upstreamRequests)} (${(result.upstreamRequests / seconds).toFixed(1)}/s), ${String(result.upstreamRefusals)} kept off by the guard`],
    ['sandbox served', result.sandboxServed === undefined ? 'n/a (SANDBOX_CONTROL off)' : String(result.sandboxServed)],
    ['Redis errors', String(result.redisErrors)],
  ];
  const width = Math.max(...rows.map(([label]) => label.length));
  return rows.map(([label, value]) => `  ${label.padEnd(width)}  ${value}`).join('\n');
}

/** The report, then the machine-readable line (`LOADTEST_RESULT {json}`) last. */
export function printReport(result: LoadResult, seconds: number): void {
  process.stdout.write(`${formatReport(result, seconds)}\nLOADTEST_RESULT ${JSON.stringify(result)}\n`);
}

/** A LOADTEST_* setting: a positive integer, or the default when unset. */
export function positiveInt(name: string, fallback: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  if (!/^[1-9][0-9]{0,5}$/.test(text)) throw new TypeError(`${name} must be a positive integer`);
  return Number(text);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const required = (name: string): string => {
    const value = process.env[name];
    if (value === undefined || value === '') throw new TypeError(`${name} is required`);
    return value;
  };
  const seconds = positiveInt('LOADTEST_SECONDS', 10);
  runLoad({
    targetUrl: required('TARGET_URL'),
    adminUrls: required('ADMIN_URLS').split(',').map((u) => u.trim()).filter((u) => u !== ''),
    sandboxUrl: process.env.SANDBOX_URL === '' ? undefined : process.env.SANDBOX_URL,
    secret: required('JWT_SECRET'),
    seconds,
    connections: positiveInt('LOADTEST_CONNECTIONS', 32),
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
