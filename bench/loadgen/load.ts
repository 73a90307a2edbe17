/**
 * One run of the load: the replicas' and the sandbox's counters read, the readers (and walkers)
 * through the balancer for the run's seconds, a line a second, then the totals: throughput,
 * latency percentiles and statuses (every answer timed, at 1 µs), and the hit ratio, coalesced
 * waits, upstream calls, Redis errors and prefetches as the difference of the replicas' counters
 * over the run, and the requests the sandbox served.
 */
import type autocannon from 'autocannon';
import type { WalkFigures } from '../lib/load/walkers.js';
import { LatencyHistogram } from '../lib/stats.js';
import {
  hitRatioBetween,
  isUpstreamSeries,
  prefetchesBetween,
  sandboxCounts,
  scrape,
  settledCounts,
  sum,
  type Totals,
} from './counters.js';
import { readerTokens, readTargets, readThroughBalancer, walkBeside } from './readers.js';
import { SecondsRecorder } from './seconds.js';
import type { LoadOptions, LoadtestResult, SecondSample } from './types.js';

const statusClass = (code: number): string => `${String(Math.floor(code / 100))}xx`;

export async function runLoad(options: LoadOptions): Promise<LoadtestResult> {
  const write = options.write ?? ((line: string) => process.stdout.write(`${line}\n`));
  const tokens = await readerTokens(options.secret);
  const targets = readTargets();
  const before = await scrape(options.adminUrls);
  const servedBefore = (await sandboxCounts(options.sandboxUrl))?.served;

  write(
    `load: ${String(options.connections)} connections for ${String(options.seconds)} s against ${options.targetUrl} (${String(tokens.length)} credentials, ${String(targets.length)} pages per company)`,
  );
  const overall = new LatencyHistogram();
  const statusCodes: Record<string, number> = {};
  const seconds = new SecondsRecorder(options.adminUrls, before, write);
  const ticker = setInterval(() => seconds.close(false), 1000);
  const walking = walkBeside(options, tokens);
  const result = await readThroughBalancer(options, targets, tokens, {
    answered: (responseTime, statusCode) => {
      overall.record(responseTime);
      const code = String(statusCode);
      statusCodes[code] = (statusCodes[code] ?? 0) + 1;
      seconds.answered(responseTime, code);
    },
    failed: () => seconds.failed(),
  });
  const walks = await walking;
  clearInterval(ticker);
  seconds.close(true);
  await seconds.done();

  const { after, served } = await settledCounts(options, before, servedBefore);
  return loadtestResult({ result, overall, statusCodes, before, after, served, timeline: seconds.timeline, walks });
}

interface RunTotals {
  readonly result: autocannon.Result;
  readonly overall: LatencyHistogram;
  readonly statusCodes: Record<string, number>;
  /** The replicas' counters when the load started and once it settled. */
  readonly before: Totals;
  readonly after: Totals;
  readonly served: number | undefined;
  readonly timeline: readonly SecondSample[];
  readonly walks: WalkFigures | undefined;
}

function loadtestResult(run: RunTotals): LoadtestResult {
  const { result, overall, statusCodes, before, after } = run;
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
    sandboxServed: run.served,
    timeline: run.timeline,
    ...(run.walks !== undefined && { walks: run.walks }),
    ...prefetchesIfAny(prefetchesBetween(before, after)),
  };
}

/** The prefetches, when any was started or skipped (prefetch is on for some resource). */
function prefetchesIfAny(prefetches: Record<string, number>): { prefetches?: Record<string, number> } {
  return Object.values(prefetches).some((n) => n > 0) ? { prefetches } : {};
}
