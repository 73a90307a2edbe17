/**
 * The `BENCH_RESULT {json}` line that ends `npm run bench`, for machines: every target's figures,
 * every phase's, and each verdict by its target.
 */
import { breakdownResult } from '../hit-breakdown.js';
import type { BenchRun, TargetFigures } from './figures.js';
import type { Disturbance } from './markdown.js';
import type { Verdict } from './verdicts.js';

export function benchResultLine(
  run: BenchRun,
  rows: readonly TargetFigures[],
  list: readonly Verdict[],
  disturbance: Disturbance,
  elapsed: number,
): string {
  const { setup, half, allocation, resume, rateLimited, crowd, coalesced, stored } = run;
  return `BENCH_RESULT ${JSON.stringify({
    generator: setup.ctx.generator.label,
    nginx: 'missing' in setup.nginx ? null : setup.nginx.version,
    haproxy: 'missing' in setup.haproxy ? null : setup.haproxy.version,
    targets: rows.map(targetResult),
    busy_rounds: disturbance.busyRounds,
    hit_rounds: disturbance.rounds,
    half_load_rate: half.rate,
    allocation: {
      bare_bytes_per_answer: Math.round(allocation.bare.bytesPerAnswer),
      proxy_bytes_per_answer: Math.round(allocation.proxy.bytesPerAnswer),
      proxy_promoted_per_answer: round(allocation.proxy.promotedPerAnswer, 1),
      proxy_longest_young_ms: allocation.proxy.longestScavengeMs,
      proxy_full_collections: allocation.proxy.fullCollections,
    },
    resume: Object.fromEntries(
      [...resume.byTarget].map(([name, f]) => [name, { first_p99_ms: f.firstP99Ms, steady_p99_ms: f.steadyP99Ms }]),
    ),
    upstream_during_hits: run.upstreamDuringHits,
    refreshes_allowed_during_hits: run.refreshesAllowed,
    anchors_origin_during_hits: run.originDuringHits,
    rate_limited: {
      rps: Math.round(rateLimited.refused.rps),
      us_cpu_per_req: round(rateLimited.refused.usPerRequest, 2),
      p99_ms: rateLimited.refused.p99Ms,
      answers_429: rateLimited.answers429,
      other: rateLimited.other,
      redis_commands: rateLimited.redisCommands,
      redis_commands_background: rateLimited.redisCommandsBackground,
    },
    many_credentials: {
      tokens: crowd.settings.tokens,
      batch: crowd.settings.batch,
      median_s: round(crowd.medianSeconds, 2),
      slowest_ratio: round(crowd.slowestRatio, 2),
      rss_mb: Math.round(crowd.rssMb),
    },
    coalescing: { requests: coalesced.requests, upstream: coalesced.upstream, statuses: coalesced.statuses },
    redis_load: {
      idle_per_s: round(run.redisLoad.idlePerSecond, 1),
      per_hot_page_per_s: round(run.redisLoad.told.perHotPagePerSecond, 3),
      per_hot_page_per_s_without_channel: round(run.redisLoad.asking.perHotPagePerSecond, 3),
    },
    redis: {
      stored_ratio: round(stored.storedRatio, 3),
      value_ratio: round(stored.valueRatio, 3),
      raw_bytes: Math.round(stored.rawBytes),
    },
    breakdown_us: Object.fromEntries(
      Object.entries(breakdownResult(run.breakdown)).map(([name, us]) => [name, round(us, 2)]),
    ),
    pass: Object.fromEntries(list.map((v) => [v.target, v.pass ?? null])),
    seconds: Math.round(elapsed),
  })}`;
}

function targetResult(row: TargetFigures): Record<string, string | number> {
  return {
    name: row.name,
    rps_50: Math.round(row.fiftyPages.rps),
    ratio_50: round(row.ratioFiftyPages, 3),
    us_cpu_50: round(row.fiftyPages.usPerRequest, 2),
    p50_ms_50: row.fiftyPages.p50Ms,
    p99_ms_50: row.fiftyPages.p99Ms,
    rps_1: Math.round(row.onePage.rps),
    ratio_1: round(row.ratioOnePage, 3),
    cpu_ratio_50: round(row.cpuRatioFiftyPages, 3),
    cpu_ratio_1: round(row.cpuRatioOnePage, 3),
    us_cpu_1: round(row.onePage.usPerRequest, 2),
    p50_ms_1: row.onePage.p50Ms,
    p99_ms_1: row.onePage.p99Ms,
    p99_ms_half: row.halfLoadP99Ms,
    bytes_per_answer: Math.round(row.fiftyPages.bytesPerResponse),
  };
}

function round(n: number, digits: number): number {
  const scale = 10 ** digits;
  return Math.round(n * scale) / scale;
}
