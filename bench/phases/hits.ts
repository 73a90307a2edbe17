/**
 * The hit phase: interleaved closed-loop rounds against every target (the bare `node:http`
 * server, nginx's proxy_cache, HAProxy doing the same job, the proxy's cache hits, …), over the 50 warmed pages and over one
 * page, each server pinned to the server CPU and the generator to the client CPU. Reports
 * medians per target and workload: req/s, its ratio to the bare server, p50/p99, server CPU per
 * request, client CPU, bytes per answer.
 */
import { fmt, fmtInt, say, spread, textTable } from '../lib/format.js';
import type { LoadResult, LoadSpec } from '../lib/load/types.js';
import {
  type MeasuredServer,
  measureRound,
  pairRatios,
  type Round,
  rotation,
  type Summary,
  summarize,
} from '../lib/rounds.js';
import { median } from '../lib/stats.js';
import { describeTail } from '../lib/tail-probe.js';
import { type BenchContext, type Page, requestsFor } from './context.js';

/** The servers a target can run against. */
export type ServerName = 'bare' | 'nginx' | 'haproxy' | 'proxy' | 'before';

/** One line of the results: a server, and the headers its requests carry beyond Authorization. */
export interface HitTarget {
  readonly name: string;
  readonly server: ServerName;
  readonly headers?: Readonly<Record<string, string>>;
}

export const WORKLOADS = ['50 pages', 'one page'] as const;
export type Workload = (typeof WORKLOADS)[number];

export interface WorkloadFigures {
  readonly rounds: readonly Round[];
  readonly summary: Summary;
  /** Median of this target's req/s over the bare server's in the same round. */
  readonly pairRatioToBare: number;
}

export type HitFigures = ReadonlyMap<string, Readonly<Record<Workload, WorkloadFigures>>>;

export interface HitPhaseInput {
  readonly targets: readonly HitTarget[];
  readonly servers: Readonly<Record<ServerName, MeasuredServer | undefined>>;
  readonly pages: readonly Page[];
  readonly bearer: (company: string) => string;
  /** The target the others are compared with. */
  readonly bare: string;
}

function pagesOf(workload: Workload, pages: readonly Page[]): readonly Page[] {
  return workload === 'one page' ? pages.slice(0, 1) : pages;
}

function serverOf(input: HitPhaseInput, target: HitTarget): MeasuredServer {
  const server = input.servers[target.server];
  if (server === undefined) throw new Error(`${target.name}: its server (${target.server}) is not running`);
  return server;
}

export function describeRound(r: Round): string {
  return (
    `${fmtInt(r.load.rps).padStart(7)} req/s  p50 ${fmt(r.load.p50Ms)} ms  p99 ${fmt(r.load.p99Ms)} ms  ` +
    `server CPU ${fmt(r.serverCpuPct, 0)}% (${fmt(r.serverUsPerRequest, 1)} µs/req)  client CPU ${fmt(r.load.clientCpuPct, 0)}%` +
    (r.load.unexpected + r.load.errors > 0
      ? `  unexpected ${String(r.load.unexpected)} errors ${String(r.load.errors)}`
      : '') +
    (r.tail === undefined ? '' : `\n      tail: ${describeTail([r.tail], median)}`)
  );
}

export async function runHitPhase(ctx: BenchContext, input: HitPhaseInput): Promise<HitFigures> {
  const { rounds, seconds, connections, warmupSeconds, leadSeconds } = ctx.settings;
  const width = Math.max(...input.targets.map((t) => t.name.length));
  const specFor = (target: HitTarget, workload: Workload, durationSec: number): LoadSpec => ({
    url: serverOf(input, target).url,
    connections,
    durationSec,
    requests: requestsFor(pagesOf(workload, input.pages), input.bearer, target.headers),
  });
  const run = (spec: LoadSpec, label: string): Promise<LoadResult> => ctx.generator.run(spec, ctx.workDir, label);

  if (warmupSeconds > 0) {
    for (const target of input.targets) await run(specFor(target, '50 pages', warmupSeconds), `warmup-${target.name}`);
  }
  const measured = new Map<string, Record<Workload, Round[]>>(
    input.targets.map((t) => [t.name, { '50 pages': [], 'one page': [] }]),
  );
  for (let round = 1; round <= rounds; round++) {
    for (const workload of WORKLOADS) {
      for (const target of rotation(input.targets, round)) {
        const label = `${target.name}-${workload}-${String(round)}`;
        if (leadSeconds > 0) await run(specFor(target, workload, leadSeconds), `lead-${label}`);
        const r = await measureRound(serverOf(input, target), specFor(target, workload, seconds), run, label);
        measured.get(target.name)?.[workload].push(r);
        say(`  round ${String(round)} ${workload.padEnd(8)} ${target.name.padEnd(width)} ${describeRound(r)}`);
      }
    }
  }

  const figures = new Map<string, Record<Workload, WorkloadFigures>>();
  const bare = measured.get(input.bare);
  for (const [name, byWorkload] of measured) {
    const of = (workload: Workload): WorkloadFigures => {
      const own = byWorkload[workload];
      return { rounds: own, summary: summarize(own), pairRatioToBare: median(pairRatios(own, bare?.[workload] ?? [])) };
    };
    figures.set(name, { '50 pages': of('50 pages'), 'one page': of('one page') });
  }
  printHitTables(figures, input.bare, rounds);
  return figures;
}

function printHitTables(figures: HitFigures, bareName: string, rounds: number): void {
  for (const workload of WORKLOADS) {
    const bare = figures.get(bareName)?.[workload].summary;
    say();
    say(`  ${workload}: medians of ${String(rounds)} rounds`);
    const rows = [...figures].map(([name, byWorkload]) => {
      const { summary, pairRatioToBare } = byWorkload[workload];
      return [
        name,
        fmtInt(summary.rps),
        bare === undefined ? 'n/a' : fmt(summary.rps / bare.rps, 3),
        fmt(pairRatioToBare, 3),
        fmt(summary.p50Ms),
        fmt(summary.p99Ms),
        fmt(summary.usPerRequest, 1),
        `${fmt(summary.serverCpuPct, 0)}%`,
        `${fmt(summary.clientCpuPct, 0)}%`,
        fmtInt(summary.bytesPerResponse),
        spread(summary.rpsByRound, 0),
      ];
    });
    for (const line of textTable(
      [
        'target',
        'req/s',
        '× bare',
        'pairs',
        'p50 ms',
        'p99 ms',
        'µs CPU/req',
        'server CPU',
        'client CPU',
        'B/answer',
        'req/s range',
      ],
      rows,
    ))
      say(line);
    const unexpected = [...figures].filter(
      ([, byWorkload]) => byWorkload[workload].summary.unexpected + byWorkload[workload].summary.errors > 0,
    );
    for (const [name, byWorkload] of unexpected) {
      say(
        `  ${name}: ${String(byWorkload[workload].summary.unexpected)} answers with another status, ${String(byWorkload[workload].summary.errors)} errors`,
      );
    }
  }
  say("  (× bare: ratio of the medians; pairs: median of each round's ratio to the bare server measured beside it)");
  for (const [name, byWorkload] of figures)
    for (const workload of WORKLOADS) {
      const tails = byWorkload[workload].rounds.flatMap((r) => (r.tail === undefined ? [] : [r.tail]));
      if (tails.length > 0)
        say(`  ${name}, ${workload}, what the tail is made of (medians): ${describeTail(tails, median)}`);
    }
}
