/**
 * What a round's tail is made of, read from the proxy's own `/metrics` before and after the round
 * (the bench reports the tail's cause, not only its size): the event loop's longest delay
 * during the round (prom-client's event-loop monitor, whose histogram is reset at every scrape, so
 * the scrape before a round starts its window), the garbage collector's time by kind and its pauses
 * over 10 ms, the page reads that left the in-process tier for the store or the upstream, and the
 * answers that waited for the upstream (a miss, or a read joined to another's fetch: a page read
 * after its stale window is revalidated before it is served, docs/cache.md) beside the answers
 * from a stored copy that took the proxy over 10 ms — which tells a tail of hits from a tail of
 * revalidations.
 */

/** A scrape: every sample of the series the probe reads, by its full name with labels. */
export type Samples = ReadonlyMap<string, number>;

export interface TailFigures {
  /** The event loop's longest delay in the round, ms (what a request that arrived then waited). */
  readonly loopDelayMaxMs: number;
  /** Garbage collection in the round, ms, by kind (major, minor, incremental, weakcb). */
  readonly gcMs: Readonly<Record<string, number>>;
  /** Collections in the round that paused for more than 10 ms. */
  readonly gcPausesOver10Ms: number;
  /** L1 misses in the round: page reads that went to the store. */
  readonly storeReads: number;
  /** Requests sent to the upstream in the round (a refresh or a fill). */
  readonly upstreamRequests: number;
  /** Answers in the round that waited for the upstream: cache result `miss` or `collapsed`. */
  readonly waitedForUpstream: number;
  /** Answers from a stored copy (`hit`, `stale`) that took over 10 ms by the proxy's own clock. */
  readonly slowCopies: number;
}

const READ =
  /^(nodejs_eventloop_lag_max_seconds|nodejs_gc_duration_seconds_(sum|bucket)|slab_proxy_l1_lookups_total|slab_proxy_upstream_requests_total|slab_proxy_requests_total|slab_proxy_request_duration_seconds_bucket)\b/;

/** The cache results of answers made without waiting for the upstream (src/cache/entry/cache-status.ts). */
const FROM_COPY = ['cache="hit"', 'cache="stale"'];
const WAITED = ['cache="miss"', 'cache="collapsed"'];

export function parseSamples(text: string): Samples {
  const samples = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!READ.test(line)) continue;
    const space = line.lastIndexOf(' ');
    const value = Number(line.slice(space + 1));
    if (Number.isFinite(value)) samples.set(line.slice(0, space), (samples.get(line.slice(0, space)) ?? 0) + value);
  }
  return samples;
}

export async function scrapeSamples(metricsUrl: string): Promise<Samples> {
  const res = await fetch(metricsUrl);
  if (!res.ok) throw new Error(`${metricsUrl} answered ${String(res.status)}`);
  return parseSamples(await res.text());
}

function summed(before: Samples, after: Samples, match: (series: string) => boolean): number {
  let total = 0;
  for (const [series, value] of after) if (match(series)) total += value - (before.get(series) ?? 0);
  return total;
}

function gcKinds(after: Samples): string[] {
  const kinds = new Set<string>();
  for (const series of after.keys()) {
    const kind = /^nodejs_gc_duration_seconds_sum\{.*kind="([a-z]+)"/.exec(series)?.[1];
    if (kind !== undefined) kinds.add(kind);
  }
  return [...kinds].sort();
}

/** The round between two scrapes; `after`'s loop delay is the round's, the histogram reset by `before`. */
export function tailBetween(before: Samples, after: Samples): TailFigures {
  const gcMs: Record<string, number> = {};
  for (const kind of gcKinds(after))
    gcMs[kind] =
      1000 *
      summed(before, after, (s) => s.startsWith('nodejs_gc_duration_seconds_sum{') && s.includes(`kind="${kind}"`));
  const collections = summed(
    before,
    after,
    (s) => s.startsWith('nodejs_gc_duration_seconds_bucket{') && s.includes('le="+Inf"'),
  );
  const within10Ms = summed(
    before,
    after,
    (s) => s.startsWith('nodejs_gc_duration_seconds_bucket{') && s.includes('le="0.01"'),
  );
  let loopDelayMaxMs = 0;
  for (const [series, value] of after)
    if (series.startsWith('nodejs_eventloop_lag_max_seconds')) loopDelayMaxMs = Math.max(loopDelayMaxMs, value * 1000);
  return {
    loopDelayMaxMs,
    gcMs,
    gcPausesOver10Ms: collections - within10Ms,
    storeReads: summed(
      before,
      after,
      (s) => s.startsWith('slab_proxy_l1_lookups_total{') && s.includes('result="miss"'),
    ),
    upstreamRequests: summed(before, after, (s) => s.startsWith('slab_proxy_upstream_requests_total')),
    waitedForUpstream: summed(
      before,
      after,
      (s) => s.startsWith('slab_proxy_requests_total{') && WAITED.some((label) => s.includes(label)),
    ),
    slowCopies: slowAnswers(before, after, FROM_COPY),
  };
}

/** Answers with one of `results` over 10 ms: the histogram's count less its 10-ms bucket. */
function slowAnswers(before: Samples, after: Samples, results: readonly string[]): number {
  const of = (bound: string): number =>
    summed(
      before,
      after,
      (s) =>
        s.startsWith('slab_proxy_request_duration_seconds_bucket{') &&
        s.includes(`le="${bound}"`) &&
        results.some((label) => s.includes(label)),
    );
  return of('+Inf') - of('0.01');
}

/** The round's tail figures, or undefined for a server without metrics (bare, nginx). */
export interface TailProbe {
  start(): Promise<void>;
  stop(): Promise<TailFigures>;
}

export function tailProbe(metricsUrl: string): TailProbe {
  let before: Samples = new Map();
  return {
    async start() {
      before = await scrapeSamples(metricsUrl);
    },
    async stop() {
      return tailBetween(before, await scrapeSamples(metricsUrl));
    },
  };
}

/** The medians' companion: each figure's median over rounds, GC kinds summed per round. */
export function describeTail(tails: readonly TailFigures[], median: (values: number[]) => number): string {
  if (tails.length === 0) return '';
  const gcTotal = (t: TailFigures): number => Object.values(t.gcMs).reduce((a, b) => a + b, 0);
  const major = (t: TailFigures): number => t.gcMs.major ?? 0;
  const fmt1 = (n: number): string => (Number.isFinite(n) ? n.toFixed(1) : 'n/a');
  return (
    `loop delay max ${fmt1(median(tails.map((t) => t.loopDelayMaxMs)))} ms, ` +
    `GC ${fmt1(median(tails.map(gcTotal)))} ms a round (major ${fmt1(median(tails.map(major)))} ms), ` +
    `pauses > 10 ms ${fmt1(median(tails.map((t) => t.gcPausesOver10Ms)))}, ` +
    `store reads ${fmt1(median(tails.map((t) => t.storeReads)))}, upstream ${fmt1(median(tails.map((t) => t.upstreamRequests)))}, ` +
    `answers that waited for it ${fmt1(median(tails.map((t) => t.waitedForUpstream)))}, ` +
    `copies served in over 10 ms ${fmt1(median(tails.map((t) => t.slowCopies)))}`
  );
}
