/**
 * The Markdown that docs/benchmarks.md takes verbatim from a run of `npm run bench`: a stamp line
 * with the command, the date and the machine, the figures per target, a warning when the machine
 * was busy, and the targets with this run's verdicts.
 */
import { fmt, fmtInt, markdownTable, verdict } from '../lib/format.js';
import type { HitFigures } from '../phases/hits.js';
import type { TargetFigures } from './figures.js';
import type { Verdict } from './verdicts.js';

/** The figures table's header: a test holds the copy in docs/benchmarks.md to this. */
export const FIGURES_HEADER = [
  'target',
  'req/s, 50 pages',
  '× bare',
  'µs CPU/req',
  'p50 / p99 ms',
  'req/s, one page',
  '× bare',
  'µs CPU/req',
  'p50 / p99 ms',
  'p99 ms at half load',
  'bytes/answer',
] as const;
export const VERDICTS_HEADER = ['target', 'this run', 'verdict'] as const;

export function figuresTable(rows: readonly TargetFigures[]): string[] {
  return markdownTable(
    FIGURES_HEADER,
    rows.map((row) => [
      row.name,
      fmtInt(row.fiftyPages.rps),
      fmt(row.ratioFiftyPages, 2),
      fmt(row.fiftyPages.usPerRequest, 1),
      `${fmt(row.fiftyPages.p50Ms)} / ${fmt(row.fiftyPages.p99Ms)}`,
      fmtInt(row.onePage.rps),
      fmt(row.ratioOnePage, 2),
      fmt(row.onePage.usPerRequest, 1),
      `${fmt(row.onePage.p50Ms)} / ${fmt(row.onePage.p99Ms)}`,
      fmt(row.halfLoadP99Ms),
      fmtInt(row.fiftyPages.bytesPerResponse),
    ]),
  );
}

export function verdictsTable(list: readonly Verdict[]): string[] {
  return markdownTable(
    VERDICTS_HEADER,
    list.map((v) => [v.target, v.figure, v.pass === undefined ? 'n/a' : verdict(v.pass)]),
    ['left', 'left', 'left'],
  );
}

/** Closed-loop rounds whose server had less than this share of its CPU: others' work was on its core. */
export const BUSY_SERVER_CPU_PCT = 90;

/** How many of the hit rounds ran on a busy machine (see BUSY_SERVER_CPU_PCT). */
export interface Disturbance {
  readonly busyRounds: number;
  readonly rounds: number;
}

/** How many of the closed-loop rounds of the hit phase ran with their server short of its CPU. */
export function disturbanceOf(hits: HitFigures): Disturbance {
  const hitRounds = [...hits.values()].flatMap((byWorkload) => [
    ...byWorkload['50 pages'].rounds,
    ...byWorkload['one page'].rounds,
  ]);
  return {
    busyRounds: hitRounds.filter((r) => !(r.serverCpuPct >= BUSY_SERVER_CPU_PCT)).length,
    rounds: hitRounds.length,
  };
}

/** The lines for docs/benchmarks.md: stamp, figures, a warning when the machine was busy, targets. */
export function benchMarkdown(
  stamp: string,
  rows: readonly TargetFigures[],
  list: readonly Verdict[],
  disturbance: Disturbance,
): string[] {
  const busy =
    disturbance.busyRounds === 0
      ? []
      : [
          '',
          `Busy machine: in ${String(disturbance.busyRounds)} of ${String(disturbance.rounds)} closed-loop rounds the server had less than ${String(BUSY_SERVER_CPU_PCT)}% of its CPU ` +
            '(other processes on its core): req/s and latencies are unreliable; µs CPU/req is not.',
        ];
  return [stamp, '', ...figuresTable(rows), ...busy, '', ...verdictsTable(list)];
}
