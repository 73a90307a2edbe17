/**
 * The verdicts of the phases that run their own proxies: the noisy neighbour (fair shares), the
 * freshness runs on the live sandbox (the shipped TTLs, measured as the yardstick; invalidations
 * and automatic lifetimes, judged), and many credentials.
 */
import { fmt, fmtInt } from '../lib/format.js';
import { ADVICE_TOLERANCE, type AdviceFigures } from '../phases/advice-accuracy.js';
import {
  AUTO_P99_RATIO,
  AUTO_STALE_RATIO,
  type FreshnessFigures,
  type FreshnessRuns,
  freshnessSettings,
  INVALIDATED_LIST_P99_RATIO,
  INVALIDATED_P99_MS,
  INVALIDATED_STALE_SHARE,
  INVALIDATED_UPSTREAM_RATIO,
} from '../phases/freshness.js';
import { type ManyCredentialsFigures, TARGET_BATCH_RATIO, TARGET_RSS_MB } from '../phases/many-credentials.js';
import type { NeighbourFigures } from '../phases/noisy-neighbour.js';
import type { Verdict } from './verdicts.js';

export function neighbourVerdict(neighbour: NeighbourFigures): Verdict {
  return {
    target: "noisy neighbour: B's cold misses beside A's storm: 0 refused, p99 ≤ 2× alone",
    figure: `${String(neighbour.beside.refused)} refused, p99 ${fmt(neighbour.beside.p99Ms, 0)} vs ${fmt(neighbour.alone.p99Ms, 0)} ms (${fmt(neighbour.beside.p99Ms / neighbour.alone.p99Ms)}×)`,
    pass: neighbour.pass,
  };
}

/** The shipped TTLs (measured), invalidations on every workload and automatic lifetimes (judged). */
export function freshnessVerdicts(runs: FreshnessRuns): Verdict[] {
  const { fixed } = runs;
  return [
    {
      target: 'freshness on the live sandbox, the shipped TTLs (measured, the yardstick for other lifetimes)',
      figure: `${fmt(fixed.staleShare * 100, 1)}% stale, staleness p99 ${fmt(fixed.p99Ms / 1000, 1)} s, ${fmtInt(fixed.upstreamPerMinute)} upstream requests/min`,
      pass: undefined,
    },
    invalidatedVerdict('mixed', runs.invalidated, undefined, undefined),
    invalidatedVerdict('pages', runs.pagesInvalidated, runs.pagesFixed, runs.pagesStill),
    invalidatedVerdict('append', runs.appendInvalidated, runs.appendFixed, runs.logStill),
    invalidatedVerdict('move', runs.moveInvalidated, runs.moveFixed, runs.logStill),
    autoVerdict(runs.pagesFixed, runs.pagesAuto),
  ];
}

/** What an invalidated run needs of the upstream: the changes' pages and one cold miss a page, a minute. */
function neededPerMinute(run: FreshnessFigures): number {
  return run.pageChangesPerMinute + (run.pages * 60) / freshnessSettings().seconds;
}

/**
 * Every change sent to the proxy, on one workload: few stale answers, soon refreshed, for no more
 * of the upstream than the pages the changes reach and the cold misses (nor, given the fixed run,
 * than the fixed TTLs ask: on `mixed` the first pages change faster than any TTL refreshes them,
 * so fresh pages cost more there), and list pages read about as fast as with nothing changing.
 */
function invalidatedVerdict(
  workload: string,
  run: FreshnessFigures,
  fixed: FreshnessFigures | undefined,
  still: FreshnessFigures | undefined,
): Verdict {
  const needed = run.upstreamPerMinute / neededPerMinute(run);
  const toFixed = fixed === undefined ? undefined : run.upstreamPerMinute / fixed.upstreamPerMinute;
  const listP99 = still === undefined ? undefined : run.listLatency.p99Ms / still.listLatency.p99Ms;
  return {
    target: `invalidations (${workload} workload): ≤ ${fmt(INVALIDATED_STALE_SHARE * 100, 0)}% stale, staleness p99 ≤ ${fmt(INVALIDATED_P99_MS / 1000, 0)} s, upstream ≤ ${fmt(INVALIDATED_UPSTREAM_RATIO, 1)}× (the changes' pages + cold misses)${toFixed === undefined ? '' : " and ≤ the fixed TTLs'"}${listP99 === undefined ? '' : `, list p99 ≤ ${fmt(INVALIDATED_LIST_P99_RATIO, 0)}× nothing changing`}`,
    figure: `${fmt(run.staleShare * 100, 1)}% stale, staleness p99 ${fmt(run.p99Ms / 1000, 1)} s, ${fmtInt(run.upstreamPerMinute)} upstream requests/min (${fmtInt(run.notModifiedPerMinute)} 304s; ${fmt(needed)}× needed${toFixed === undefined ? '' : `, ${fmt(toFixed)}× fixed`})${listP99 === undefined || still === undefined ? '' : `, list p99 ${fmt(run.listLatency.p99Ms, 1)} vs ${fmt(still.listLatency.p99Ms, 1)} ms (${fmt(listP99)}×)`}`,
    pass:
      run.staleShare <= INVALIDATED_STALE_SHARE &&
      run.p99Ms <= INVALIDATED_P99_MS &&
      needed <= INVALIDATED_UPSTREAM_RATIO &&
      (toFixed === undefined || toFixed <= 1) &&
      (listP99 === undefined || listP99 <= INVALIDATED_LIST_P99_RATIO),
  };
}

/**
 * Automatic lifetimes against the shipped TTLs on the `pages` workload: at most half the stale
 * answers for no more upstream requests, or as few for at most half the requests; and a staleness
 * p99 at most half the fixed TTLs'.
 */
function autoVerdict(fixed: FreshnessFigures, auto: FreshnessFigures): Verdict {
  const stale = auto.staleShare / fixed.staleShare;
  const requests = auto.upstreamPerMinute / fixed.upstreamPerMinute;
  const p99 = auto.p99Ms / fixed.p99Ms;
  const trade = (stale <= AUTO_STALE_RATIO && requests <= 1) || (stale <= 1 && requests <= AUTO_STALE_RATIO);
  return {
    target: `automatic lifetimes (pages workload): stale ≤ ${fmt(AUTO_STALE_RATIO)}× fixed at ≤ its requests, or ≤ its stale at ≤ ${fmt(AUTO_STALE_RATIO)}× the requests; p99 ≤ ${fmt(AUTO_P99_RATIO)}×`,
    figure: `${fmt(auto.staleShare * 100, 1)}% vs ${fmt(fixed.staleShare * 100, 1)}% stale (${fmt(stale)}×), p99 ${fmt(auto.p99Ms / 1000, 1)} vs ${fmt(fixed.p99Ms / 1000, 1)} s (${fmt(p99)}×), ${fmtInt(auto.upstreamPerMinute)} vs ${fmtInt(fixed.upstreamPerMinute)} upstream requests/min (${fmt(requests)}×)`,
    pass: trade && p99 <= AUTO_P99_RATIO,
  };
}

/** The freshness advice's stale share against the share readers saw, for three change rates. */
export function adviceVerdict(advice: AdviceFigures): Verdict {
  const ratios = advice.rows.map(
    (row) =>
      `${row.resource} ${row.estimatedStaleShare === null ? 'n/a' : `${fmt(row.estimatedStaleShare / row.measuredStaleShare)}×`}`,
  );
  return {
    target: `freshness advice: estimated stale share within ±${fmt(ADVICE_TOLERANCE * 100, 0)}% of measured, changes every 5, 20 and 60 s`,
    figure: ratios.join(', '),
    pass: advice.pass,
  };
}

export function crowdVerdict(crowd: ManyCredentialsFigures): Verdict {
  return {
    target: `many credentials: no batch over ${String(TARGET_BATCH_RATIO)}× the median, RSS < ${String(TARGET_RSS_MB)} MB`,
    figure: `${crowd.slowestRatio.toFixed(2)}×, ${Math.round(crowd.rssMb)} MB`,
    pass: crowd.pass,
  };
}
