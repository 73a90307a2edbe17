/**
 * Prometheus metrics (docs/operations.md#metrics), with `prom-client`, served on the admin port's `/metrics`.
 *
 * Labels are bounded by construction: a resource is one of the catalog's thirteen names (or
 * `other` for what the data plane does not take), a status is an HTTP status the proxy itself
 * sends, a cache result is one of five words, a policy one of three. Never a company, a token, a
 * subject or a record id: those would grow without bound (and the first three are not for a
 * metrics scraper to see).
 *
 * The per-request series (requests, their durations, L1 lookups) are counted in plain numbers and
 * handed to prom-client when scraped:
 * prom-client hashes and validates the label object on every `inc()` and `observe()`, ~2.5 µs
 * a request measured here, against ~4 ns for a map lookup and two additions (a cache hit costs
 * ~70 µs in all). Everything off the hit path uses prom-client directly.
 */
import type { RateLimitPolicy } from '../errors/proxy-error.js';
import { Counter, Gauge, Histogram, type MetricType, Registry, collectDefaultMetrics } from 'prom-client';
import { PACKAGE_VERSION } from '../platform/package.js';
import { RESOURCE_NAMES, isResourceName } from '../catalog/resources.js';

/**
 * The `cache` label: what the cache did for a request (the cache's `CacheResult`, named here so that
 * this module, below the cache, depends on no domain); absent: not a read.
 */
export type CacheLabel = 'hit' | 'stale' | 'miss' | 'collapsed' | 'bypass';

export const METRICS_CONTENT_TYPE = Registry.PROMETHEUS_CONTENT_TYPE;

/** Where a Redis failure happened: the cache store and fills, the inbound limits, the upstream budget, the shared operator state. */
export type RedisComponent = 'cache' | 'limits' | 'budget' | 'control';
export type CoalesceScope = 'process' | 'replicas';
/** Why a fill did not reach the upstream: the budget's bound wait, the open breaker, a company's 429 pause. */
export type UpstreamRefusal = 'budget' | 'breaker' | 'paused';

export interface Metrics {
  /** One per request the proxy answered on its API port. */
  request(resource: string | undefined, status: number, cache: CacheLabel | undefined, seconds: number): void;
  /** One per upstream exchange: its status, or `error` (refused, reset, deadline, bad answer). */
  upstream(resource: string, status: number | 'error', seconds: number): void;
  upstreamRefused(reason: UpstreamRefusal): void;
  /** A request that waited for another request's fill instead of asking the upstream. */
  coalesced(scope: CoalesceScope): void;
  /** A 429 the proxy answered, by the policy that refused. */
  rateLimited(policy: RateLimitPolicy): void;
  redisError(component: RedisComponent): void;
  l1Lookup(hit: boolean): void;
  storeLookup(result: 'hit' | 'stale' | 'miss' | 'unavailable'): void;
  /** Prometheus text for a scrape. */
  render(): Promise<string>;
}

/** What an in-process cache tier holds: the L1 in front of Redis, or the store of a single replica. */
export interface CacheFootprint {
  readonly tier: 'l1' | 'memory';
  readonly entries: number;
  readonly bytes: number;
}

export interface MetricsOptions {
  /** Read on each scrape: 0 closed, 1 half-open, 2 open. */
  readonly circuitState?: () => 'closed' | 'half-open' | 'open';
  /** Read on each scrape: true when the shared Redis is connected. Without Redis, omitted. */
  readonly redisUp?: (() => boolean) | undefined;
  /** Adds Node's process metrics (default true; the tests' many apps in one process share them). */
  readonly processMetrics?: boolean;
  /** Read on each scrape: requests on the client port not yet answered. */
  readonly inFlightRequests?: () => number;
  /** Read on each scrape: entries and bytes of each in-process cache tier. */
  readonly cacheFootprint?: () => readonly CacheFootprint[];
  /** Read on each scrape: seconds since this replica last confirmed its operator state with Redis. */
  readonly operatorStateAgeSeconds?: (() => number) | undefined;
  /** Read on each scrape: seconds this replica has been without a usable Redis, 0 when connected. */
  readonly redisDownSeconds?: (() => number) | undefined;
  /** Read on each scrape: where the upstream budget's slots come from now, of the modes it has. */
  readonly budgetMode?: { readonly modes: readonly string[]; readonly current: () => string } | undefined;
}

/** Latency buckets, seconds: a hit is tens of microseconds, a miss is the upstream's time. */
const REQUEST_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
const UPSTREAM_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** One series of a histogram recorded off prom-client: counts per bucket (the last is +Inf), sum, count. */
interface HistogramSeries {
  readonly labels: Record<string, string>;
  readonly buckets: Float64Array;
  sum: number;
  count: number;
}

type HistogramObject = Awaited<ReturnType<Histogram['get']>>;

/**
 * A histogram whose observations are plain additions; prom-client formats it on a scrape through
 * `get()`, the method every metric implements for its registry.
 */
class RecordedHistogram extends Histogram {
  readonly #name: string;
  readonly #help: string;
  readonly #bounds: readonly number[];
  readonly #series = new Map<string, HistogramSeries>();

  constructor(name: string, help: string, bounds: readonly number[], registry: Registry) {
    super({ name, help, buckets: [...bounds], registers: [registry] });
    this.#name = name;
    this.#help = help;
    this.#bounds = bounds;
  }

  /** The series for a label set, created once: the hot path keeps the reference. */
  series(labels: Record<string, string>): HistogramSeries {
    const key = JSON.stringify(labels);
    let series = this.#series.get(key);
    if (series === undefined) {
      series = { labels, buckets: new Float64Array(this.#bounds.length + 1), sum: 0, count: 0 };
      this.#series.set(key, series);
    }
    return series;
  }

  record(series: HistogramSeries, value: number): void {
    const bounds = this.#bounds;
    let bucket = 0;
    while (bucket < bounds.length && value > (bounds[bucket] ?? Infinity)) bucket++;
    series.buckets[bucket] = (series.buckets[bucket] ?? 0) + 1;
    series.sum += value;
    series.count += 1;
  }

  /** What the registry formats (prom-client asks for this one first, where a metric has it). */
  getForPromString(): Promise<HistogramObject> {
    return this.get();
  }

  override get(): Promise<HistogramObject> {
    const values: HistogramObject['values'] = [];
    for (const series of this.#series.values()) {
      let cumulative = 0;
      this.#bounds.forEach((bound, index) => {
        cumulative += series.buckets[index] ?? 0;
        values.push({ metricName: `${this.#name}_bucket`, labels: { ...series.labels, le: bound }, value: cumulative });
      });
      values.push({
        metricName: `${this.#name}_bucket`,
        labels: { ...series.labels, le: '+Inf' },
        value: series.count,
      });
      values.push({ metricName: `${this.#name}_sum`, labels: series.labels, value: series.sum });
      values.push({ metricName: `${this.#name}_count`, labels: series.labels, value: series.count });
    }
    // prom-client's typings give `type` as a numeric enum; at run time (and in the text format)
    // it is the word.
    return Promise.resolve({
      name: this.#name,
      help: this.#help,
      type: 'histogram' as unknown as MetricType,
      aggregator: 'sum',
      collect: () => undefined,
      values,
    });
  }
}

/** A count kept with plain additions between scrapes. */
interface PendingCount<L extends string> {
  readonly labels: Record<L, string>;
  pending: number;
}

/**
 * The hot path's counters: each label set's count is a plain number, handed to the prom-client
 * counter when it is scraped (its `collect`), so that no `inc()` hashes labels per request.
 */
class PendingCounts<L extends string> {
  readonly #entries = new Map<string, PendingCount<L>>();

  /** The count for a label set, created once: the hot path keeps the reference. */
  entry(labels: Record<L, string>): PendingCount<L> {
    const key = JSON.stringify(labels);
    let entry = this.#entries.get(key);
    if (entry === undefined) {
      entry = { labels, pending: 0 };
      this.#entries.set(key, entry);
    }
    return entry;
  }

  flushInto(counter: Counter<L>): void {
    for (const entry of this.#entries.values()) {
      if (entry.pending === 0) continue;
      counter.inc(entry.labels, entry.pending);
      entry.pending = 0;
    }
  }
}

const CIRCUIT_VALUE = { closed: 0, 'half-open': 1, open: 2 } as const;

/** Process metrics (heap, event loop lag, GC, handles): one collector per process, not per app. */
let processRegistry: Registry | undefined;
function sharedProcessRegistry(): Registry {
  if (processRegistry === undefined) {
    processRegistry = new Registry();
    // Their standard names (`process_*`, `nodejs_*`), unprefixed: stock Node.js dashboards and
    // alerts work as they are.
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

/** A resource label: a catalog name, else `other` (a client-chosen path must not become a label). */
function resourceLabel(resource: string | undefined): string {
  return resource !== undefined && isResourceName(resource) ? resource : 'other';
}

/** Statuses are the proxy's own, but a passed-through upstream status could be anything: bounded to 100–599. */
function isStatusCode(status: number): boolean {
  return Number.isInteger(status) && status >= 100 && status <= 599;
}

/** A status label: the code, or `other` outside 100–599. */
function statusLabel(status: number): string {
  return isStatusCode(status) ? String(status) : 'other';
}

export function createMetrics(options: MetricsOptions = {}): Metrics {
  const registry = new Registry();
  const requestCounts = new PendingCounts<'resource' | 'status' | 'cache'>();
  new Counter({
    name: 'slab_proxy_requests_total',
    help: 'Requests answered on the API port, by resource, status and cache result.',
    labelNames: ['resource', 'status', 'cache'] as const,
    registers: [registry],
    collect() {
      requestCounts.flushInto(this);
    },
  });
  const requestSeconds = new RecordedHistogram(
    'slab_proxy_request_duration_seconds',
    'Time from the request to its answer, by cache result.',
    REQUEST_BUCKETS,
    registry,
  );
  const upstreamRequests = new Counter({
    name: 'slab_proxy_upstream_requests_total',
    help: 'Requests sent to the system of record, by resource and status (error: no usable answer).',
    labelNames: ['resource', 'status'] as const,
    registers: [registry],
  });
  const upstreamSeconds = new Histogram({
    name: 'slab_proxy_upstream_duration_seconds',
    help: 'Time of each upstream exchange, by resource.',
    labelNames: ['resource'] as const,
    buckets: UPSTREAM_BUCKETS,
    registers: [registry],
  });
  const upstreamRefusals = new Counter({
    name: 'slab_proxy_upstream_refusals_total',
    help: 'Fills not sent to the upstream: budget (no slot in time), breaker (open), paused (after its 429).',
    labelNames: ['reason'] as const,
    registers: [registry],
  });
  const coalesced = new Counter({
    name: 'slab_proxy_coalesced_waits_total',
    help: "Requests answered by another request's fill: in this process, or another replica's.",
    labelNames: ['scope'] as const,
    registers: [registry],
  });
  const rateLimited = new Counter({
    name: 'slab_proxy_rate_limited_total',
    help: 'Answers 429, by the policy that refused: credential, company, or upstream (its own 429 or pause).',
    labelNames: ['policy'] as const,
    registers: [registry],
  });
  const redisErrors = new Counter({
    name: 'slab_proxy_redis_errors_total',
    help: 'Redis commands that failed or timed out, by component.',
    labelNames: ['component'] as const,
    registers: [registry],
  });
  const l1Counts = new PendingCounts<'result'>();
  const l1Lookups = new Counter({
    name: 'slab_proxy_l1_lookups_total',
    help: 'In-process (L1) lookups by result; hit ratio = hit / (hit + miss).',
    labelNames: ['result'] as const,
    registers: [registry],
    collect() {
      l1Counts.flushInto(this);
    },
  });
  const storeLookups = new Counter({
    name: 'slab_proxy_store_lookups_total',
    help: 'Shared store lookups by result: hit (fresh), stale, miss, unavailable (Redis failing).',
    labelNames: ['result'] as const,
    registers: [registry],
  });
  const { circuitState, redisUp } = options;
  new Gauge({
    name: 'slab_proxy_upstream_circuit_state',
    help: 'Upstream circuit breaker: 0 closed, 1 half-open, 2 open.',
    registers: [registry],
    collect() {
      this.set(CIRCUIT_VALUE[circuitState?.() ?? 'closed']);
    },
  });
  if (redisUp !== undefined) {
    new Gauge({
      name: 'slab_proxy_redis_up',
      help: 'The shared Redis: 1 connected and usable, 0 not.',
      registers: [registry],
      collect() {
        this.set(redisUp() ? 1 : 0);
      },
    });
  }

  new Gauge({
    name: 'slab_proxy_build_info',
    help: 'Always 1; the labels say which build runs: the package version and the Node.js version.',
    labelNames: ['version', 'node'] as const,
    registers: [registry],
  })
    .labels(PACKAGE_VERSION, process.version)
    .set(1);
  /** A gauge read from its callback at each scrape; absent when nothing feeds it. */
  const scrapedGauge = (name: string, help: string, read: (() => number) | undefined): void => {
    if (read === undefined) return;
    new Gauge({
      name,
      help,
      registers: [registry],
      collect() {
        this.set(read());
      },
    });
  };
  scrapedGauge('slab_proxy_requests_in_flight', 'Requests on the API port not yet answered.', options.inFlightRequests);
  scrapedGauge(
    'slab_proxy_operator_state_age_seconds',
    'Seconds since this replica last confirmed its operator state (TTL overrides, revocations, blocks) with Redis.',
    options.operatorStateAgeSeconds,
  );
  scrapedGauge(
    'slab_proxy_redis_down_seconds',
    'Seconds this replica has been without a usable Redis; 0 while connected.',
    options.redisDownSeconds,
  );
  const { budgetMode } = options;
  if (budgetMode !== undefined) {
    new Gauge({
      name: 'slab_proxy_upstream_budget_mode',
      help: 'Where the upstream budget takes its slots from: 1 for the current mode (shared, closed, cut-off, local), 0 for the others.',
      labelNames: ['mode'] as const,
      registers: [registry],
      collect() {
        const current = budgetMode.current();
        for (const mode of budgetMode.modes) this.labels(mode).set(mode === current ? 1 : 0);
      },
    });
  }
  const { cacheFootprint } = options;
  if (cacheFootprint !== undefined) {
    const tierGauge = (name: string, what: string, read: (tier: CacheFootprint) => number): void => {
      new Gauge({
        name,
        help: `${what} held by an in-process cache tier: l1 (in front of Redis) or memory (the single-replica store).`,
        labelNames: ['tier'] as const,
        registers: [registry],
        collect() {
          for (const tier of cacheFootprint()) this.labels(tier.tier).set(read(tier));
        },
      });
    };
    tierGauge('slab_proxy_cache_entries', 'Entries', (tier) => tier.entries);
    tierGauge('slab_proxy_cache_bytes', 'Bytes', (tier) => tier.bytes);
  }

  // Every known series starts at zero, so that rates and ratios exist before the first event.
  for (const resource of RESOURCE_NAMES) upstreamRequests.labels(resource, '200').inc(0);
  for (const reason of ['budget', 'breaker', 'paused'] as const) upstreamRefusals.labels(reason).inc(0);
  for (const scope of ['process', 'replicas'] as const) coalesced.labels(scope).inc(0);
  for (const policy of ['credential', 'company', 'upstream'] as const) rateLimited.labels(policy).inc(0);
  for (const component of ['cache', 'limits', 'budget', 'control'] as const) redisErrors.labels(component).inc(0);
  for (const result of ['hit', 'miss'] as const) l1Lookups.labels(result).inc(0);
  for (const result of ['hit', 'stale', 'miss', 'unavailable'] as const) storeLookups.labels(result).inc(0);

  const l1Hit = l1Counts.entry({ result: 'hit' });
  const l1Miss = l1Counts.entry({ result: 'miss' });
  /**
   * Each request label set's count and duration series, by resource label, then cache label, then
   * status (bounded: at most 14 resources × 6 results × 501 statuses). Three lookups of keys that
   * exist already: a request adds to counts and makes no string or object (issue 11).
   */
  type RequestEntry = {
    readonly count: PendingCount<'resource' | 'status' | 'cache'>;
    readonly seconds: HistogramSeries;
  };
  const requestEntries = new Map<string, Map<string, Map<number, RequestEntry>>>();
  function requestEntry(resource: string, cache: string, status: number): RequestEntry {
    let byCache = requestEntries.get(resource);
    if (byCache === undefined) {
      byCache = new Map();
      requestEntries.set(resource, byCache);
    }
    let byStatus = byCache.get(cache);
    if (byStatus === undefined) {
      byStatus = new Map();
      byCache.set(cache, byStatus);
    }
    // Statuses outside 100–599 share the `other` label, and one entry (key 0).
    const statusKey = isStatusCode(status) ? status : 0;
    let entry = byStatus.get(statusKey);
    if (entry === undefined) {
      const labels = { resource, status: statusLabel(status), cache };
      entry = { count: requestCounts.entry(labels), seconds: requestSeconds.series({ cache }) };
      byStatus.set(statusKey, entry);
    }
    return entry;
  }
  const includeProcess = options.processMetrics !== false;
  // Started now, not at the first scrape: the event-loop delay and GC collectors measure from
  // the moment they exist.
  if (includeProcess) sharedProcessRegistry();

  return {
    request(resource, status, cache, seconds) {
      const entry = requestEntry(resourceLabel(resource), cache ?? 'none', status);
      entry.count.pending += 1;
      requestSeconds.record(entry.seconds, seconds);
    },
    upstream(resource, status, seconds) {
      const label = resourceLabel(resource);
      upstreamRequests.labels(label, status === 'error' ? 'error' : statusLabel(status)).inc();
      upstreamSeconds.labels(label).observe(seconds);
    },
    upstreamRefused: (reason) => upstreamRefusals.labels(reason).inc(),
    coalesced: (scope) => coalesced.labels(scope).inc(),
    rateLimited: (policy) => rateLimited.labels(policy).inc(),
    redisError: (component) => redisErrors.labels(component).inc(),
    l1Lookup: (hit) => {
      (hit ? l1Hit : l1Miss).pending += 1;
    },
    storeLookup: (result) => storeLookups.labels(result).inc(),
    async render() {
      const own = await registry.metrics();
      return includeProcess ? `${await sharedProcessRegistry().metrics()}\n${own}` : own;
    },
  };
}
