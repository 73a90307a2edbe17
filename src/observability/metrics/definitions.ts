/**
 * Every metric the proxy exports (docs/operations.md#metrics): its name, help text, labels, buckets,
 * and the series that exist from the start. The counters start each known series at zero, so that
 * rates and ratios exist before the first event; the gauges are read at each scrape from what the
 * app passes in.
 */
import { RESOURCE_NAMES } from '../../catalog/resources.js';
import { PACKAGE_VERSION } from '../../platform/package.js';

export interface CounterDefinition<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  /** The label values, in `labelNames` order, of each series that starts at zero. */
  readonly zeroes?: readonly (readonly string[])[];
}

export interface HistogramDefinition<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames?: readonly L[];
  readonly buckets: readonly number[];
}

/** What an in-process cache tier holds: the L1 in front of Redis, or the store of a single replica. */
export interface CacheFootprint {
  readonly tier: 'l1' | 'memory';
  readonly entries: number;
  readonly bytes: number;
}

/** What the gauges read at each scrape; a gauge that nothing feeds is absent (but for the breaker's). */
export interface ScrapeSources {
  /** Read on each scrape: 0 closed, 1 half-open, 2 open. */
  readonly circuitState?: () => 'closed' | 'half-open' | 'open';
  /** Read on each scrape: true when the shared Redis is connected. Without Redis, omitted. */
  readonly redisUp?: (() => boolean) | undefined;
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
  /** Read on each scrape: bytes each company holds in the in-process cache tier. */
  readonly companyCacheBytes?: () => ReadonlyMap<string, number>;
  /** Read on each scrape: each resource's freshness figures over the advice's window (docs/cache.md#freshness-advice). */
  readonly freshness?: () => readonly ResourceFreshnessReading[];
  /** Read on each scrape: whether the change channel vouches for the L1 (docs/cache.md#the-l1). Without Redis, omitted. */
  readonly l1ChannelTold?: (() => boolean) | undefined;
}

/**
 * A resource's freshness figures, as the gauges read them; null where nothing is known yet (that
 * resource's series is then absent).
 */
export interface ResourceFreshnessReading {
  readonly resource: string;
  readonly changeIntervalSeconds: number | null;
  readonly unchangedShare: number | null;
  readonly staleShareEstimate: number | null;
}

/** What a gauge shows at a scrape: one value, or a value for each label set (values in `labelNames` order). */
export type GaugeReading = number | ReadonlyArray<readonly [labels: readonly string[], value: number]>;

export interface GaugeDefinition {
  readonly name: string;
  readonly help: string;
  readonly labelNames?: readonly string[];
  /** How the gauge reads the app at a scrape; undefined when nothing feeds it: the gauge is absent. */
  readonly read: (sources: ScrapeSources) => (() => GaugeReading) | undefined;
}

/** Latency buckets, seconds: a hit is tens of microseconds, a miss is the upstream's time. */
const REQUEST_BUCKETS = [
  0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10,
];
const UPSTREAM_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

const CIRCUIT_VALUE = { closed: 0, 'half-open': 1, open: 2 } as const;

export const REQUESTS = {
  name: 'slab_proxy_requests_total',
  help: 'Requests answered on the API port, by resource, status and cache result.',
  labelNames: ['resource', 'status', 'cache'],
} as const satisfies CounterDefinition<string>;

export const REQUEST_SECONDS = {
  name: 'slab_proxy_request_duration_seconds',
  help: 'Time from the request to its answer, by cache result.',
  buckets: REQUEST_BUCKETS,
} as const satisfies HistogramDefinition<string>;

export const UPSTREAM_REQUESTS = {
  name: 'slab_proxy_upstream_requests_total',
  help: 'Requests sent to the system of record, by resource and status (error: no usable answer).',
  labelNames: ['resource', 'status'],
  zeroes: RESOURCE_NAMES.map((resource) => [resource, '200']),
} as const satisfies CounterDefinition<string>;

export const UPSTREAM_SECONDS = {
  name: 'slab_proxy_upstream_duration_seconds',
  help: 'Time of each upstream exchange, by resource.',
  labelNames: ['resource'],
  buckets: UPSTREAM_BUCKETS,
} as const satisfies HistogramDefinition<string>;

export const UPSTREAM_REFUSALS = {
  name: 'slab_proxy_upstream_refusals_total',
  help: 'Fills not sent to the upstream: budget (no slot in time), breaker (open), paused (after its 429).',
  labelNames: ['reason'],
  zeroes: [['budget'], ['breaker'], ['paused']],
} as const satisfies CounterDefinition<string>;

export const COALESCED_WAITS = {
  name: 'slab_proxy_coalesced_waits_total',
  help: "Requests answered by another request's fill: in this process, or another replica's.",
  labelNames: ['scope'],
  zeroes: [['process'], ['replicas']],
} as const satisfies CounterDefinition<string>;

export const RATE_LIMITED = {
  name: 'slab_proxy_rate_limited_total',
  help: 'Answers 429, by the policy that refused: credential, company, or upstream (its own 429 or pause); on the admin port, invalidation (the change feed bucket).',
  labelNames: ['policy'],
  zeroes: [['credential'], ['company'], ['upstream'], ['invalidation']],
} as const satisfies CounterDefinition<string>;

export const REDIS_ERRORS = {
  name: 'slab_proxy_redis_errors_total',
  help: 'Redis commands that failed or timed out, by component.',
  labelNames: ['component'],
  zeroes: [['cache'], ['limits'], ['budget'], ['control']],
} as const satisfies CounterDefinition<string>;

export const L1_LOOKUPS = {
  name: 'slab_proxy_l1_lookups_total',
  help: 'In-process (L1) lookups by result; hit ratio = hit / (hit + miss).',
  labelNames: ['result'],
  zeroes: [['hit'], ['miss']],
} as const satisfies CounterDefinition<string>;

export const L1_CHANNEL_GAPS = {
  name: 'slab_proxy_l1_channel_gaps_total',
  help: 'Gaps in the change channel (docs/cache.md#the-l1), by kind: skipped (a number skipped), missed (given out and not heard by the next heartbeat), regressed (the sequence went back), failover (another Redis process keeps it). After each, the L1 confirms its copies before they serve again.',
  labelNames: ['gap'],
  zeroes: [['skipped'], ['missed'], ['regressed'], ['failover']],
} as const satisfies CounterDefinition<string>;

export const STORE_LOOKUPS = {
  name: 'slab_proxy_store_lookups_total',
  help: 'Shared store lookups by result: hit (fresh), stale, miss, unavailable (Redis failing).',
  labelNames: ['result'],
  zeroes: [['hit'], ['stale'], ['miss'], ['unavailable']],
} as const satisfies CounterDefinition<string>;

export const REVALIDATIONS = {
  name: 'slab_proxy_revalidations_total',
  help: 'Refreshes of a stored page by what the upstream said: not_modified (304), identical (200, the same body), modified (another answer). The first two only freshen the stored entry.',
  labelNames: ['result'],
  zeroes: [['not_modified'], ['identical'], ['modified']],
} as const satisfies CounterDefinition<string>;

export const INVALIDATIONS = {
  name: 'slab_proxy_cache_invalidations_total',
  help: 'Soft invalidations taken (docs/cache.md#soft-invalidation), by scope: records (the pages of records named and the lists of their resource) or resource (every page of the resource). Each marks pages stale on every replica; none deletes.',
  labelNames: ['scope'],
  zeroes: [['records'], ['resource']],
} as const satisfies CounterDefinition<string>;

export const INVALIDATIONS_REFUSED = {
  name: 'slab_proxy_invalidations_refused_total',
  help: 'Changes POST /admin/cache/invalidate refused, by reason: flood (more than the change feed bucket held: 429 with Retry-After) or batch (a batch larger than the bucket: 400). Each member of a batch is one change (docs/operations.md#the-change-feed).',
  labelNames: ['reason'],
  zeroes: [['flood'], ['batch']],
} as const satisfies CounterDefinition<string>;

export const WINDOWLESS_FILLS = {
  name: 'slab_proxy_cache_windowless_fills_total',
  help: 'List pages filled that broke the keyset rule (ids ascending, above the cursor, next_after_id the last), by resource: every change of their group reaches them (docs/cache.md#window-marks).',
  labelNames: ['resource'],
  zeroes: [],
} as const satisfies CounterDefinition<string>;

export const PREFETCHES = {
  name: 'slab_proxy_prefetches_total',
  help: 'Next pages of keyset walks fetched ahead of the walker: started (asked of the upstream), used (a request of any replica took the page first here), wasted (expired untaken), failed (the upstream refused or failed), and skipped by reason: cached, filling, leased (another replica), cap, budget (no slot to spare).',
  labelNames: ['result'],
  zeroes: [['started'], ['used'], ['wasted'], ['failed'], ['cached'], ['filling'], ['leased'], ['cap'], ['budget']],
} as const satisfies CounterDefinition<string>;

export const UPSTREAM_FILL_BYTES = {
  name: 'slab_proxy_upstream_fill_bytes_total',
  help: 'Body bytes the upstream sent for fills of cacheable pages, first fills and refreshes (0 for a 304), by resource.',
  labelNames: ['resource'],
  zeroes: RESOURCE_NAMES.map((resource) => [resource]),
} as const satisfies CounterDefinition<string>;

/** Companies named in the per-company series, at most (company-series.ts); the rest are `other`. */
export const NAMED_COMPANIES = 10;
export const OTHER_COMPANIES = 'other';

export const COMPANY_REQUESTS = {
  name: 'slab_proxy_company_requests_total',
  help: 'Requests answered on the API port, by company (the most active, named for the life of the process, at most 10; the rest other) and cache result (none: not a read).',
  labelNames: ['company', 'cache'],
  zeroes: [[OTHER_COMPANIES, 'hit']],
} as const satisfies CounterDefinition<string>;

export const COMPANY_SLOTS = {
  name: 'slab_proxy_company_upstream_slots_total',
  help: "Clients' fills at the upstream budget, by company (as for slab_proxy_company_requests_total) and result: granted or refused.",
  labelNames: ['company', 'result'],
  zeroes: [
    [OTHER_COMPANIES, 'granted'],
    [OTHER_COMPANIES, 'refused'],
  ],
} as const satisfies CounterDefinition<string>;

export const COMPANY_SLOT_WAIT = {
  name: 'slab_proxy_company_upstream_wait_seconds_total',
  help: "Seconds clients' fills waited for an upstream slot, granted or refused, by company (as for slab_proxy_company_requests_total).",
  labelNames: ['company'],
  zeroes: [[OTHER_COMPANIES]],
} as const satisfies CounterDefinition<string>;

/** The `NAMED_COMPANIES` companies holding the most bytes, and the rest as `other`. */
function topByBytes(bytes: ReadonlyMap<string, number>): GaugeReading {
  const sorted = [...bytes].sort((a, b) => b[1] - a[1]);
  let other = 0;
  for (const [, held] of sorted.slice(NAMED_COMPANIES)) other += held;
  return [
    ...sorted.slice(0, NAMED_COMPANIES).map(([company, held]) => [[company], held] as const),
    [[OTHER_COMPANIES], other],
  ];
}

/** A gauge per in-process cache tier, of what `read` takes from its footprint. */
function tierGauge(name: string, what: string, read: (tier: CacheFootprint) => number): GaugeDefinition {
  return {
    name,
    help: `${what} held by an in-process cache tier: l1 (in front of Redis) or memory (the single-replica store).`,
    labelNames: ['tier'],
    read: ({ cacheFootprint }) =>
      cacheFootprint && (() => cacheFootprint().map((tier) => [[tier.tier], read(tier)] as const)),
  };
}

/** A gauge per resource of one freshness figure, for the resources where it is known. */
function freshnessGauge(
  name: string,
  help: string,
  figure: (reading: ResourceFreshnessReading) => number | null,
): GaugeDefinition {
  return {
    name,
    help,
    labelNames: ['resource'],
    read: ({ freshness }) =>
      freshness &&
      (() =>
        freshness().flatMap((reading) => {
          const value = figure(reading);
          return value === null ? [] : [[[reading.resource], value] as const];
        })),
  };
}

/** The gauges, in the order a scrape shows them. */
export const GAUGES: readonly GaugeDefinition[] = [
  {
    name: 'slab_proxy_upstream_circuit_state',
    help: 'Upstream circuit breaker: 0 closed, 1 half-open, 2 open.',
    read:
      ({ circuitState }) =>
      () =>
        CIRCUIT_VALUE[circuitState?.() ?? 'closed'],
  },
  {
    name: 'slab_proxy_redis_up',
    help: 'The shared Redis: 1 connected and usable, 0 not.',
    read: ({ redisUp }) => redisUp && (() => (redisUp() ? 1 : 0)),
  },
  {
    name: 'slab_proxy_build_info',
    help: 'Always 1; the labels say which build runs: the package version and the Node.js version.',
    labelNames: ['version', 'node'],
    read: () => () => [[[PACKAGE_VERSION, process.version], 1]],
  },
  {
    name: 'slab_proxy_requests_in_flight',
    help: 'Requests on the API port not yet answered.',
    read: ({ inFlightRequests }) => inFlightRequests,
  },
  {
    name: 'slab_proxy_operator_state_age_seconds',
    help: 'Seconds since this replica last confirmed its operator state (TTL overrides, revocations, blocks) with Redis.',
    read: ({ operatorStateAgeSeconds }) => operatorStateAgeSeconds,
  },
  {
    name: 'slab_proxy_l1_channel_told',
    help: 'The change channel: 1 while this replica has heard every purge and invalidation announced, so that L1 copies serve as long as their pages are fresh without asking Redis; 0 while a heartbeat fails, and copies are confirmed every L1 lifetime.',
    read: ({ l1ChannelTold }) => l1ChannelTold && (() => (l1ChannelTold() ? 1 : 0)),
  },
  {
    name: 'slab_proxy_redis_down_seconds',
    help: 'Seconds this replica has been without a usable Redis; 0 while connected.',
    read: ({ redisDownSeconds }) => redisDownSeconds,
  },
  {
    name: 'slab_proxy_upstream_budget_mode',
    help: 'Where the upstream budget takes its slots from: 1 for the current mode (shared, closed, cut-off, local), 0 for the others.',
    labelNames: ['mode'],
    read: ({ budgetMode }) =>
      budgetMode &&
      (() => {
        const current = budgetMode.current();
        return budgetMode.modes.map((mode) => [[mode], mode === current ? 1 : 0] as const);
      }),
  },
  tierGauge('slab_proxy_cache_entries', 'Entries', (tier) => tier.entries),
  tierGauge('slab_proxy_cache_bytes', 'Bytes', (tier) => tier.bytes),
  {
    name: 'slab_proxy_company_cache_bytes',
    help: 'Bytes held in the in-process cache tier by company: the 10 holding most at the scrape, the rest other.',
    labelNames: ['company'],
    read: ({ companyCacheBytes }) => companyCacheBytes && (() => topByBytes(companyCacheBytes())),
  },
  freshnessGauge(
    'slab_proxy_cache_change_interval_seconds',
    "Mean interval between changes of a resource's pages, estimated from this replica's refreshes of the last 10 minutes; absent until one found a change.",
    (reading) => reading.changeIntervalSeconds,
  ),
  freshnessGauge(
    'slab_proxy_cache_unchanged_refresh_ratio',
    "Share of this replica's refreshes of the last 10 minutes that found the page unchanged (a 304, or the same body), by resource.",
    (reading) => reading.unchangedShare,
  ),
  freshnessGauge(
    'slab_proxy_cache_stale_read_ratio_estimate',
    'Estimated share of reads served stale at the TTL in force, from the change interval, by resource.',
    (reading) => reading.staleShareEstimate,
  ),
];
