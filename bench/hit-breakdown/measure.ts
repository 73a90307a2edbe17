/**
 * How the hit breakdown times a piece of work: batches of inputs made untimed, then one call on
 * each timed with `process.hrtime.bigint()` (its promise awaited only when it returns one, as
 * `runSteps` does), the event loop turning between batches so that pino's destination and ioredis
 * run as they do in the server. A timing is the mean µs per call (GC included), the median of the
 * batch means, and this process's CPU per call.
 */
import { setImmediate as turn } from 'node:timers/promises';
import { median } from '../lib/stats.js';

export interface Timing {
  readonly meanUs: number;
  readonly medianUs: number;
  /** CPU time of this process per call, µs, over the timed batches. */
  readonly cpuUs: number;
}

/** What is timed: a batch's inputs, made untimed, and one call on one of them. */
export interface Workload<T> {
  prepare(size: number): T[] | Promise<T[]>;
  /** A promise it returns is awaited, inside the timing (as `runSteps` awaits a step's). */
  run(input: T): unknown;
  readonly batch?: number;
}

const BATCH = 256;
const WARMUP_MS = 60;
const MIN_BATCHES = 10;
/** Untimed preparation can cost many times the step it prepares: each row's wall time is bounded too. */
const WALL_PER_MEASURED = 4;

/** Results are written here so that the compiler cannot drop the work being measured. */
export let sink: unknown;

/** Keeps `value` where the compiler cannot drop the work that made it. */
export function keep(value: unknown): void {
  sink = value;
}

/** Times `work` in batches for `ms` of measured time (or `WALL_PER_MEASURED` × that of wall time); warms it up first. */
export async function measure<T>(work: Workload<T>, ms: number): Promise<Timing> {
  const batch = work.batch ?? BATCH;
  const runBatch = async (): Promise<{ elapsed: bigint; cpuUs: number; calls: number }> => {
    const inputs = await work.prepare(batch);
    const cpuBefore = process.cpuUsage();
    const started = process.hrtime.bigint();
    for (const input of inputs) {
      const result = work.run(input);
      sink = result instanceof Promise ? await result : result;
    }
    const elapsed = process.hrtime.bigint() - started;
    const cpu = process.cpuUsage(cpuBefore);
    return { elapsed, cpuUs: cpu.user + cpu.system, calls: inputs.length };
  };
  const warmUntil = performance.now() + Math.min(WARMUP_MS, ms);
  while (performance.now() < warmUntil) {
    await runBatch();
    await turn();
  }
  const means: number[] = [];
  let total = 0n;
  let cpuUs = 0;
  let calls = 0;
  const budget = BigInt(Math.round(ms * 1e6));
  const wallUntil = performance.now() + ms * WALL_PER_MEASURED;
  while ((total < budget && performance.now() < wallUntil) || means.length < MIN_BATCHES) {
    const measured = await runBatch();
    total += measured.elapsed;
    cpuUs += measured.cpuUs;
    calls += measured.calls;
    means.push(Number(measured.elapsed) / 1e3 / measured.calls);
    await turn();
  }
  return { meanUs: Number(total) / 1e3 / calls, medianUs: median(means), cpuUs: cpuUs / calls };
}

/** The i-th of a list taken round and round. */
export function cycle<T>(list: readonly T[], i: number): T {
  const item = list[i % list.length];
  if (item === undefined) throw new Error('hit-breakdown: an empty list');
  return item;
}

/** A workload over a running call index, for what needs no fresh objects per call. */
export function indexed(run: (i: number) => unknown, batch?: number): Workload<number> {
  let next = 0;
  return {
    prepare: (size) => Array.from({ length: size }, () => next++),
    run,
    ...(batch !== undefined && { batch }),
  };
}
