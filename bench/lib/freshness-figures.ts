/**
 * The freshness yardstick's figures (bench/phases/freshness.ts, bench/loadtest-freshness.ts): each
 * answer's staleness by the judge (bench/lib/freshness.ts), the share of stale answers, staleness
 * by resource (or by any other grouping, e.g. the replica that answered), what the upstream served
 * per minute by the sandbox's counters, and the console lines that report them. Plain objects, so
 * that a report's JSON holds them as they are.
 */
import { fmt, fmtInt, textTable } from './format.js';
import { type ChangeFeed, staleness, windowHolds } from './freshness.js';
import type { Judged, Target } from './freshness-run.js';
import { LatencyHistogram } from './stats.js';

/** A change missing from an answer for longer than this makes the answer stale. */
export const STALE_AFTER_MS = 1_000;

/** Staleness of a group of answers (a resource's, a replica's). */
export interface GroupFreshness {
  readonly answers: number;
  readonly stale: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly maxMs: number;
}

/** How long readers waited for a group of answers (list pages; deep ones, past the first), ms. */
export interface ReadLatency {
  readonly answers: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

export interface FreshnessFigures {
  readonly answers: number;
  readonly staleShare: number;
  readonly p99Ms: number;
  /** Every request the upstream answered, a minute; of them 304s, and the rest (200s). */
  readonly upstreamPerMinute: number;
  readonly notModifiedPerMinute: number;
  readonly okPerMinute: number;
  /** The readers' latency of list pages, and of the deep ones (a cursor past the first page). */
  readonly listLatency: ReadLatency;
  readonly deepListLatency: ReadLatency;
  readonly upstreamKbPerMinute: number;
  readonly byResource: Readonly<Record<string, GroupFreshness>>;
  /**
   * Changes the upstream made that a page read could show, per minute: for each page read, the
   * changes of its company and resource whose record lies in its keyset window as last read (a
   * list; its filters aside, which the proxy does not judge) or of its record, during the run. With
   * the cold misses (one per page), what an invalidated run needs of the upstream.
   */
  readonly pageChangesPerMinute: number;
  /** Pages read (each a cold miss once). */
  readonly pages: number;
  /** Stale answers by the path that served them (their `Cache-Status` without its numbers). */
  readonly staleByPath: Readonly<Record<string, number>>;
}

/** An answer and its staleness, ms. */
export interface Scored {
  readonly answer: Judged;
  readonly ms: number;
}

/** The run judged: its answers, the change log, the run's window and the sandbox's counters around it. */
export interface JudgedRun {
  readonly scored: readonly Scored[];
  readonly feed: ChangeFeed;
  readonly targets: readonly Target[];
  readonly startedAt: number;
  readonly seconds: number;
  readonly before: unknown;
  readonly after: unknown;
}

export function scoreAnswers(answers: readonly Judged[], feed: ChangeFeed): Scored[] {
  return answers.map((answer) => ({ answer, ms: staleness(answer, feed.of(answer.company, answer.resource)) }));
}

/** Staleness by `keyOf` of each answer, in the order the groups are first met. */
export function groupStaleness(
  scored: readonly Scored[],
  keyOf: (answer: Judged) => string,
): Record<string, GroupFreshness> {
  const groups = new Map<string, { histogram: LatencyHistogram; stale: number }>();
  for (const { answer, ms } of scored) {
    const key = keyOf(answer);
    let group = groups.get(key);
    if (group === undefined) {
      group = { histogram: new LatencyHistogram(), stale: 0 };
      groups.set(key, group);
    }
    group.histogram.record(ms);
    if (ms > STALE_AFTER_MS) group.stale += 1;
  }
  return Object.fromEntries(
    [...groups].map(([key, g]) => [
      key,
      {
        answers: g.histogram.count,
        stale: g.stale,
        p50Ms: g.histogram.percentileMs(50),
        p99Ms: g.histogram.percentileMs(99),
        maxMs: g.histogram.maxMs,
      },
    ]),
  );
}

function statsOf(value: unknown): { served: number; notModified: number; responseBytes: number } {
  const stats = value as { served?: number; notModified?: number; responseBytes?: number };
  return { served: stats.served ?? 0, notModified: stats.notModified ?? 0, responseBytes: stats.responseBytes ?? 0 };
}

/** A `Cache-Status` without its numbers: the path an answer took. */
function pathOf(cacheStatus: string): string {
  return cacheStatus.replace(/ttl=-?\d+/, 'ttl').replace(/^slab-proxy; /, '');
}

/** Changes made since `from` that each target could show, summed (`pageChangesPerMinute`). */
function pageChanges(targets: readonly Target[], scored: readonly Scored[], feed: ChangeFeed, from: number): number {
  const lastRead = new Map<string, Judged>();
  for (const { answer } of scored) lastRead.set(answer.path, answer);
  let sum = 0;
  for (const target of targets) {
    const read = lastRead.get(target.path);
    const changes = feed.of(target.company, target.resource).filter((change) => change.at >= from);
    // A page never answered: every change of its collection could have shown on it.
    sum += read === undefined ? changes.length : changes.filter((change) => windowHolds(read, change.id)).length;
  }
  return sum;
}

/** The latency of the answers `chosen` picks. */
function readLatency(scored: readonly Scored[], chosen: (answer: Judged) => boolean): ReadLatency {
  const histogram = new LatencyHistogram();
  for (const { answer } of scored) if (chosen(answer)) histogram.record(answer.latencyMs);
  return { answers: histogram.count, p50Ms: histogram.percentileMs(50), p99Ms: histogram.percentileMs(99) };
}

export function judge(run: JudgedRun): FreshnessFigures {
  const all = new LatencyHistogram();
  let stale = 0;
  const staleByPath: Record<string, number> = {};
  for (const { answer, ms } of run.scored) {
    all.record(ms);
    if (ms > STALE_AFTER_MS) {
      stale += 1;
      const path = pathOf(answer.cacheStatus);
      staleByPath[path] = (staleByPath[path] ?? 0) + 1;
    }
  }
  const [b, a] = [statsOf(run.before), statsOf(run.after)];
  const perMinute = 60 / run.seconds;
  const answers = run.scored.length;
  return {
    answers,
    staleShare: answers === 0 ? Number.NaN : stale / answers,
    p99Ms: all.percentileMs(99),
    upstreamPerMinute: (a.served - b.served) * perMinute,
    notModifiedPerMinute: (a.notModified - b.notModified) * perMinute,
    okPerMinute: (a.served - b.served - (a.notModified - b.notModified)) * perMinute,
    listLatency: readLatency(run.scored, (answer) => answer.read.kind === 'list'),
    deepListLatency: readLatency(run.scored, (answer) => answer.read.kind === 'list' && answer.read.afterId > 0),
    upstreamKbPerMinute: ((a.responseBytes - b.responseBytes) * perMinute) / 1024,
    byResource: groupStaleness(run.scored, (answer) => answer.resource),
    pageChangesPerMinute: (pageChanges(run.targets, run.scored, run.feed, run.startedAt) * 60) / run.seconds,
    pages: run.targets.length,
    staleByPath,
  };
}

/** `stale / answers` as a percentage with one decimal. */
export const stalePercent = (group: Pick<GroupFreshness, 'answers' | 'stale'>): string =>
  `${fmt((group.stale / group.answers) * 100, 1)}%`;

/** A staleness table by group (`name`: resource, replica), for the console. */
export function stalenessTable(name: string, groups: Readonly<Record<string, GroupFreshness>>): string[] {
  const rows = Object.entries(groups).map(([key, g]) => [
    key,
    fmtInt(g.answers),
    stalePercent(g),
    fmt(g.p50Ms / 1000, 1),
    fmt(g.p99Ms / 1000, 1),
    fmt(g.maxMs / 1000, 1),
  ]);
  return textTable([name, 'answers', 'stale', 'p50 s', 'p99 s', 'max s'], rows);
}

/** The console lines under a run's heading: totals, staleness by resource, page changes, stale paths. */
export function figureLines(figures: FreshnessFigures): string[] {
  const paths = Object.entries(figures.staleByPath)
    .sort((x, y) => y[1] - x[1])
    .map(([path, n]) => `${path}: ${fmtInt(n)}`);
  return [
    `  ${fmtInt(figures.answers)} answers, ${fmt(figures.staleShare * 100, 1)}% stale (a change older than 1 s missing), staleness p99 ${fmt(figures.p99Ms / 1000, 1)} s; upstream ${fmtInt(figures.upstreamPerMinute)} requests/min (${fmtInt(figures.okPerMinute)} 200s, ${fmtInt(figures.notModifiedPerMinute)} 304s), ${fmtInt(figures.upstreamKbPerMinute)} KB/min`,
    `  list pages read in p50 ${fmt(figures.listLatency.p50Ms, 1)} ms, p99 ${fmt(figures.listLatency.p99Ms, 1)} ms (${fmtInt(figures.listLatency.answers)} answers)${figures.deepListLatency.answers > 0 ? `; past the first page p50 ${fmt(figures.deepListLatency.p50Ms, 1)} ms, p99 ${fmt(figures.deepListLatency.p99Ms, 1)} ms (${fmtInt(figures.deepListLatency.answers)})` : ''}`,
    ...stalenessTable('resource', figures.byResource).map((line) => `  ${line}`),
    `  the changes could show on pages ${fmtInt(figures.pageChangesPerMinute)} times a minute; with ${fmtInt(figures.pages)} cold misses, the most an invalidated run needs of the upstream`,
    ...(paths.length > 0 ? [`  stale answers by Cache-Status: ${paths.join('; ')}`] : []),
  ];
}
