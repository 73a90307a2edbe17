/**
 * Resume: what a server pays in the first second after an idle spell (new connections, L1 copies
 * past their lifetime, leases returned, caches and code cold: what an autoscaled replica or a
 * lull in the night meets), against the seconds right after it. Each round, every target idles
 * `idleSeconds` with nothing running on the machine, then, in the round's order, takes one
 * closed-loop run of one second (the first second) and one of `steadySeconds` at once after it
 * (the steady seconds), over the 50 pages; p99 of each, medians over the rounds.
 */
import { setTimeout as delay } from 'node:timers/promises';
import { envInt } from '../lib/env.js';
import { fmt, say, textTable } from '../lib/format.js';
import type { LoadResult, LoadSpec } from '../lib/load/types.js';
import { rotation } from '../lib/rounds.js';
import { median } from '../lib/stats.js';
import { type BenchContext, requestsFor } from './context.js';
import type { HitPhaseInput, HitTarget } from './hits.js';

export interface ResumeFigures {
  readonly idleSeconds: number;
  readonly rounds: number;
  /** By target name: the medians of the first second's p99 and of the steady seconds' p99, ms. */
  readonly byTarget: ReadonlyMap<string, { readonly firstP99Ms: number; readonly steadyP99Ms: number }>;
}

export interface ResumeSettings {
  readonly idleSeconds: number;
  readonly steadySeconds: number;
  readonly rounds: number;
}

/** BENCH_RESUME_IDLE (10 s) of idle before each first second; 3 steady seconds; 3 rounds. */
export function resumeSettings(): ResumeSettings {
  return { idleSeconds: envInt('BENCH_RESUME_IDLE', 10, 1, 600), steadySeconds: 3, rounds: 3 };
}

export async function runResume(
  ctx: BenchContext,
  input: HitPhaseInput,
  targets: readonly HitTarget[],
  settings: ResumeSettings,
): Promise<ResumeFigures> {
  const { idleSeconds, steadySeconds, rounds } = settings;
  say(
    `resume: ${String(rounds)} rounds of ${String(idleSeconds)} s idle, then 1 s (the first second) and ${String(steadySeconds)} s (steady) of closed-loop load over 50 pages per target`,
  );
  const run = (spec: LoadSpec, label: string): Promise<LoadResult> => ctx.generator.run(spec, ctx.workDir, label);
  const measured = new Map<string, { first: number[]; steady: number[] }>(
    targets.map((t) => [t.name, { first: [], steady: [] }]),
  );
  const width = Math.max(...targets.map((t) => t.name.length));
  for (let round = 1; round <= rounds; round++) {
    await delay(idleSeconds * 1000);
    for (const target of rotation(targets, round)) {
      const server = input.servers[target.server];
      if (server === undefined) continue;
      const spec = (durationSec: number): LoadSpec => ({
        url: server.url,
        connections: ctx.settings.connections,
        durationSec,
        requests: requestsFor(input.pages, input.bearer, target.headers),
      });
      const first = await run(spec(1), `resume-first-${target.name}-${String(round)}`);
      const steady = await run(spec(steadySeconds), `resume-steady-${target.name}-${String(round)}`);
      measured.get(target.name)?.first.push(first.p99Ms);
      measured.get(target.name)?.steady.push(steady.p99Ms);
      say(
        `  round ${String(round)} ${target.name.padEnd(width)} first second p99 ${fmt(first.p99Ms)} ms, steady p99 ${fmt(steady.p99Ms)} ms`,
      );
    }
  }
  const byTarget = new Map(
    [...measured].map(([name, m]) => [name, { firstP99Ms: median(m.first), steadyP99Ms: median(m.steady) }]),
  );
  const rows = [...byTarget].map(([name, f]) => [
    name,
    fmt(f.firstP99Ms),
    fmt(f.steadyP99Ms),
    fmt(f.firstP99Ms / f.steadyP99Ms, 2),
  ]);
  for (const line of textTable(['target (medians)', 'first second p99 ms', 'steady p99 ms', 'first / steady'], rows))
    say(line);
  return { idleSeconds, rounds, byTarget };
}
