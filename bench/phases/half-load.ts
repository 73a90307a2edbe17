/**
 * Half load: every target at the same paced rate, half the proxy's measured throughput over 50
 * pages, open loop (latency from when each request was due), in rotated rounds. The anchors' p99
 * at that rate (bare Node, nginx) and the generator's own schedule error say whether the ruler can
 * see a tail at all: the verdict (bench/report/verdicts.ts) is given only when they are small.
 */
import { fmt, fmtInt, say, textTable } from '../lib/format.js';
import { runPacedLoad } from '../lib/load/generators.js';
import type { LoadResult, LoadSpec } from '../lib/load/types.js';
import { measureRound, type Round, rotation } from '../lib/rounds.js';
import { median } from '../lib/stats.js';
import { describeTail } from '../lib/tail-probe.js';
import { type BenchContext, requestsFor } from './context.js';
import type { HitPhaseInput } from './hits.js';

export interface HalfLoadFigures {
  readonly rate: number;
  readonly rounds: number;
  /** Medians over the rounds, by target name. */
  readonly byTarget: ReadonlyMap<
    string,
    {
      readonly p50Ms: number;
      readonly p99Ms: number;
      readonly p999Ms: number;
      readonly usPerRequest: number;
      /** The generator's schedule error, p99. */
      readonly generatorErrorP99Ms: number;
      readonly all: readonly Round[];
    }
  >;
}

export async function runHalfLoad(ctx: BenchContext, input: HitPhaseInput, rate: number): Promise<HalfLoadFigures> {
  const rounds = Math.max(1, Math.ceil(ctx.settings.rounds / 2));
  const { seconds, connections } = ctx.settings;
  say(
    `half load: ${fmtInt(rate)} req/s offered to each target (half the proxy's median over 50 pages), ${String(rounds)} rotated rounds × ${String(seconds)} s, paced open loop`,
  );
  const run = (spec: LoadSpec, label: string): Promise<LoadResult> => runPacedLoad(spec, ctx.workDir, label);
  const measured = new Map<string, Round[]>(input.targets.map((t) => [t.name, []]));
  const width = Math.max(...input.targets.map((t) => t.name.length));
  for (let round = 1; round <= rounds; round++) {
    for (const target of rotation(input.targets, round)) {
      const server = input.servers[target.server];
      if (server === undefined) throw new Error(`${target.name}: its server is not running`);
      const spec: LoadSpec = {
        url: server.url,
        connections,
        durationSec: seconds,
        overallRate: rate,
        requests: requestsFor(input.pages, input.bearer, target.headers),
      };
      const r = await measureRound(server, spec, run, `half-${target.name}-${String(round)}`);
      measured.get(target.name)?.push(r);
      say(
        `  round ${String(round)} ${target.name.padEnd(width)} p50 ${fmt(r.load.p50Ms)} ms  p99 ${fmt(r.load.p99Ms)} ms  p99.9 ${fmt(r.load.p999Ms)} ms  max ${fmt(r.load.maxMs)} ms  ` +
          `${fmt(r.serverUsPerRequest, 1)} µs CPU/req  (generator's schedule error: p99 ${fmt(r.load.scheduleErrorP99Ms ?? Number.NaN, 3)} ms, max ${fmt(r.load.scheduleErrorMaxMs ?? Number.NaN)} ms)` +
          (r.load.unexpected + r.load.errors > 0
            ? `  unexpected ${String(r.load.unexpected)} errors ${String(r.load.errors)}`
            : '') +
          (r.tail === undefined ? '' : `\n      tail: ${describeTail([r.tail], median)}`),
      );
    }
  }
  const byTarget = new Map(
    [...measured].map(([name, all]) => [
      name,
      {
        p50Ms: median(all.map((r) => r.load.p50Ms)),
        p99Ms: median(all.map((r) => r.load.p99Ms)),
        p999Ms: median(all.map((r) => r.load.p999Ms)),
        usPerRequest: median(all.map((r) => r.serverUsPerRequest)),
        generatorErrorP99Ms: median(all.map((r) => r.load.scheduleErrorP99Ms ?? Number.NaN)),
        all,
      },
    ]),
  );
  say();
  const rows = [...byTarget].map(([name, f]) => [
    name,
    fmt(f.p50Ms),
    fmt(f.p99Ms),
    fmt(f.p999Ms),
    fmt(f.usPerRequest, 1),
    fmt(f.generatorErrorP99Ms, 3),
  ]);
  const header = ['target (medians)', 'p50 ms', 'p99 ms', 'p99.9 ms', 'µs CPU/req', 'generator error p99 ms'];
  for (const line of textTable(header, rows)) say(line);
  say(
    "  latency from each request's due time; the anchors' p99 and the generator's own schedule error bound what this phase can see.",
  );
  return { rate, rounds, byTarget };
}
