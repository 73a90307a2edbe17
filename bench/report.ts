/**
 * The end of `npm run bench`: the targets with their verdicts, and the Markdown that
 * docs/benchmarks.md takes verbatim (a stamp line with the command, the date and the machine,
 * the figures per target, the targets table), so the figures there are always one run's.
 */
import { fmt, fmtInt, markdownTable, verdict } from './lib/format.js';
import type { Summary } from './lib/rounds.js';

/** Issue 11's targets. */
export const TARGETS = {
  /** Cache hits against the bare server, closed loop (wrk), on 50 pages and on one page. */
  hitRatio: 0.6,
  hitRatioGoal: 0.7,
  /** The proxy's p99 at full load over 50 pages against nginx's in the same run. */
  p99VersusNginx: 3,
  halfLoadP99Ms: 5,
  /** A `br` hit's bytes per answer against an identity hit's, over 50 pages. */
  brBytesRatio: 0.2,
} as const;

export interface TargetFigures {
  readonly name: string;
  readonly fiftyPages: Summary;
  readonly onePage: Summary;
  /** req/s over the bare server's (ratio of the medians). */
  readonly ratioFiftyPages: number;
  readonly ratioOnePage: number;
  /** The bare server's CPU per request over this target's: the ratio both would reach CPU-bound. */
  readonly cpuRatioFiftyPages: number;
  readonly cpuRatioOnePage: number;
  readonly halfLoadP99Ms: number;
}

export interface Verdict {
  readonly target: string;
  readonly figure: string;
  /** undefined: could not be judged in this run (e.g. no nginx). */
  readonly pass: boolean | undefined;
}

export interface VerdictInput {
  readonly proxy: TargetFigures;
  /** The proxy's hits with `Accept-Encoding: br`, when measured. */
  readonly proxyBr?: TargetFigures | undefined;
  /** The pages' mean body bytes, identity and `br` (the warm phase). */
  readonly bodies?: { readonly identity: number; readonly br: number } | undefined;
  readonly nginx: TargetFigures | undefined;
  readonly upstreamDuringHits: number;
  readonly coalesced: { readonly requests: number; readonly upstream: number; readonly pass: boolean };
  readonly stored: { readonly ratio: number; readonly target: number; readonly pass: boolean };
  readonly rateLimited: {
    readonly usPerRequest: number;
    readonly target: number;
    readonly other: number;
    readonly pass: boolean;
  };
  /** The closed-loop generator, e.g. "wrk 4.1.0". */
  readonly generator: string;
}

/**
 * A `br` hit (the stored bytes as they are, docs/clients.md#content-coding): its body against the identity
 * body (issue 11: "bytes on the wire ≤ 0.2× the identity body"), with the whole answers, headers
 * included, beside it; and its CPU per hit, no higher than an identity hit's (judged over 50 pages,
 * where both are measured in the same interleaved rounds).
 */
function brVerdict(identity: TargetFigures, br: TargetFigures | undefined, bodies: VerdictInput['bodies']): Verdict {
  const target = `a br hit: body ≤ ${String(TARGETS.brBytesRatio)}× the identity body, CPU per hit no higher`;
  if (br === undefined || bodies === undefined) return { target, figure: 'not measured in this run', pass: undefined };
  const bodyRatio = bodies.br / bodies.identity;
  const answers = br.fiftyPages.bytesPerResponse / identity.fiftyPages.bytesPerResponse;
  const cpu = br.fiftyPages.usPerRequest / identity.fiftyPages.usPerRequest;
  return {
    target,
    figure:
      `body ${fmtInt(bodies.br)} vs ${fmtInt(bodies.identity)} B (${fmt(bodyRatio, 2)}×), ` +
      `with headers ${fmtInt(br.fiftyPages.bytesPerResponse)} vs ${fmtInt(identity.fiftyPages.bytesPerResponse)} B (${fmt(answers, 2)}×); ` +
      `${fmt(br.fiftyPages.usPerRequest, 1)} vs ${fmt(identity.fiftyPages.usPerRequest, 1)} µs CPU (${fmt(cpu, 2)}×)`,
    pass: bodyRatio <= TARGETS.brBytesRatio && cpu <= 1,
  };
}

export function verdicts(input: VerdictInput): Verdict[] {
  const { proxy, nginx } = input;
  const ratio = (value: number, cpu: number): string =>
    `${fmt(value, 2)}×${value >= TARGETS.hitRatioGoal ? ' (goal met)' : ''}; by CPU per request ${fmt(cpu, 2)}×`;
  const versusNginx = nginx === undefined ? Number.NaN : proxy.fiftyPages.p99Ms / nginx.fiftyPages.p99Ms;
  return [
    {
      target: `hits ≥ ${String(TARGETS.hitRatio)}× bare, 50 pages (goal ${String(TARGETS.hitRatioGoal)}×; ${input.generator})`,
      figure: ratio(proxy.ratioFiftyPages, proxy.cpuRatioFiftyPages),
      pass: proxy.ratioFiftyPages >= TARGETS.hitRatio,
    },
    {
      target: `hits ≥ ${String(TARGETS.hitRatio)}× bare, one page (goal ${String(TARGETS.hitRatioGoal)}×)`,
      figure: ratio(proxy.ratioOnePage, proxy.cpuRatioOnePage),
      pass: proxy.ratioOnePage >= TARGETS.hitRatio,
    },
    {
      target: `p99 at full load, 50 pages, ≤ ${String(TARGETS.p99VersusNginx)}× nginx's`,
      figure:
        nginx === undefined
          ? `${fmt(proxy.fiftyPages.p99Ms)} ms; no nginx in this run`
          : `${fmt(proxy.fiftyPages.p99Ms)} vs ${fmt(nginx.fiftyPages.p99Ms)} ms (${fmt(versusNginx, 1)}×)`,
      pass: nginx === undefined ? undefined : versusNginx <= TARGETS.p99VersusNginx,
    },
    {
      target: `p99 at half load ≤ ${String(TARGETS.halfLoadP99Ms)} ms`,
      figure: `${fmt(proxy.halfLoadP99Ms)} ms`,
      pass: proxy.halfLoadP99Ms <= TARGETS.halfLoadP99Ms,
    },
    brVerdict(proxy, input.proxyBr, input.bodies),
    {
      target: 'upstream requests during the hit rounds: 0',
      figure: String(input.upstreamDuringHits),
      pass: input.upstreamDuringHits === 0,
    },
    {
      target: `${String(input.coalesced.requests)} cold requests over 2 replicas: 1 upstream request`,
      figure: String(input.coalesced.upstream),
      pass: input.coalesced.pass,
    },
    {
      target: `stored bytes ≤ ${String(input.stored.target)}× the raw JSON`,
      figure: `${fmt(input.stored.ratio, 3)}×`,
      pass: input.stored.pass,
    },
    {
      target: `a 429 in < ${fmtInt(input.rateLimited.target)} µs of proxy CPU, every answer a 429`,
      figure: `${fmt(input.rateLimited.usPerRequest, 1)} µs${input.rateLimited.other === 0 ? '' : `, ${String(input.rateLimited.other)} other answers`}`,
      pass: input.rateLimited.pass,
    },
  ];
}

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
