/**
 * What an answer allocates, and what the collector makes of it: the bare server and a proxy, each
 * a fresh process with the proxy's shipped V8 flags and `--trace-gc-nvp` (bench/lib/gc-trace.ts),
 * under the same closed-loop load over the 50 pages, one after the other on the server CPU. Bytes
 * allocated and promoted per answer (the sum over the run's collections, divided by its answers),
 * the longest young-generation pause, and the full collections: measured the same way for both.
 */
import { envInt } from '../lib/env.js';
import { fmt, fmtInt, say, textTable } from '../lib/format.js';
import { type GcSummary, GcTrace, summarizeGc } from '../lib/gc-trace.js';
import type { LoadSpec } from '../lib/load/types.js';
import { type Launched, stop } from '../lib/processes.js';
import { type BenchContext, type Page, requestsFor } from './context.js';

export interface AllocationSettings {
  /** Seconds of load before the measured run (a fresh proxy fills its L1, V8 compiles). */
  readonly warmupSeconds: number;
  /** The measured run of the bare server, and of the proxy (the steady minute of the targets). */
  readonly bareSeconds: number;
  readonly proxySeconds: number;
}

/** BENCH_ALLOCATION_BARE_SECONDS (15) and BENCH_ALLOCATION_SECONDS (60), after 3 s of warm-up each. */
export function allocationSettings(): AllocationSettings {
  return {
    warmupSeconds: 3,
    bareSeconds: envInt('BENCH_ALLOCATION_BARE_SECONDS', 15, 1, 600),
    proxySeconds: envInt('BENCH_ALLOCATION_SECONDS', 60, 1, 600),
  };
}

/** A server started for this phase: where to send load, and its stdout, where V8 writes. */
export interface TracedServer {
  readonly url: string;
  readonly launched: Launched;
}

export interface AllocationInput {
  readonly pages: readonly Page[];
  readonly bearer: (company: string) => string;
  /** Each starts its server with `--trace-gc-nvp` and the proxy's shipped flags, stdout piped. */
  readonly startBare: (flags: readonly string[]) => Promise<TracedServer>;
  readonly startProxy: (flags: readonly string[]) => Promise<TracedServer>;
  /** The proxy of another build (BENCH_BEFORE), measured the same way: before and after in one run. */
  readonly startBefore?: ((flags: readonly string[]) => Promise<TracedServer>) | undefined;
}

export type AllocationRun = GcSummary & { readonly answers: number; readonly seconds: number };

export interface AllocationFigures {
  readonly bare: AllocationRun;
  readonly proxy: AllocationRun;
  readonly before?: AllocationRun | undefined;
}

const TRACE_FLAGS = ['--trace-gc-nvp'] as const;

async function measure(
  ctx: BenchContext,
  input: AllocationInput,
  server: TracedServer,
  name: string,
  seconds: number,
  warmupSeconds: number,
): Promise<AllocationRun> {
  const stdout = server.launched.child.stdout;
  if (stdout === null) throw new Error(`${name}: its stdout is not piped`);
  const trace = new GcTrace(stdout);
  const spec = (durationSec: number): LoadSpec => ({
    url: server.url,
    connections: ctx.settings.connections,
    durationSec,
    requests: requestsFor(input.pages, input.bearer),
  });
  if (warmupSeconds > 0) await ctx.generator.run(spec(warmupSeconds), ctx.workDir, `allocation-warmup-${name}`);
  trace.start();
  const load = await ctx.generator.run(spec(seconds), ctx.workDir, `allocation-${name}`);
  const events = trace.stop();
  if (load.unexpected + load.errors > 0)
    throw new Error(`${name}: ${String(load.unexpected)} unexpected answers, ${String(load.errors)} errors`);
  return { ...summarizeGc(events, load.responses), answers: load.responses, seconds };
}

export async function runAllocation(
  ctx: BenchContext,
  input: AllocationInput,
  settings: AllocationSettings,
): Promise<AllocationFigures> {
  say(
    `allocation: a fresh bare server (${String(settings.bareSeconds)} s) and a fresh proxy (${String(settings.proxySeconds)} s) under closed-loop load over 50 pages, --trace-gc-nvp, after ${String(settings.warmupSeconds)} s of warm-up each`,
  );
  const bareServer = await input.startBare(TRACE_FLAGS);
  const bare = await measure(ctx, input, bareServer, 'bare', settings.bareSeconds, settings.warmupSeconds);
  await stop(bareServer.launched);
  const proxyServer = await input.startProxy(TRACE_FLAGS);
  const proxy = await measure(ctx, input, proxyServer, 'proxy', settings.proxySeconds, settings.warmupSeconds);
  await stop(proxyServer.launched);
  let before: AllocationRun | undefined;
  if (input.startBefore !== undefined) {
    const beforeServer = await input.startBefore(TRACE_FLAGS);
    before = await measure(ctx, input, beforeServer, 'before', settings.proxySeconds, settings.warmupSeconds);
    await stop(beforeServer.launched);
  }
  const rows: ReadonlyArray<readonly [string, AllocationRun]> = [
    ['bare node:http', bare],
    ['proxy cache hits', proxy],
    ...(before === undefined ? [] : [['proxy before', before] as const]),
  ];
  for (const line of textTable(
    [
      'target',
      'answers',
      'B allocated / answer',
      'B promoted / answer',
      'young collections',
      'median young ms',
      'longest young ms',
      'full collections',
      'longest full ms',
    ],
    rows.map(([name, f]) => [
      name,
      fmtInt(f.answers),
      fmtInt(f.bytesPerAnswer),
      fmt(f.promotedPerAnswer, 1),
      fmtInt(f.scavenges),
      fmt(f.medianScavengeMs),
      fmt(f.longestScavengeMs),
      fmtInt(f.fullCollections),
      fmt(f.longestFullMs),
    ]),
  ))
    say(line);
  say(`  proxy / bare, bytes allocated per answer: ${fmt(proxy.bytesPerAnswer / bare.bytesPerAnswer, 2)}×`);
  return { bare, proxy, before };
}
