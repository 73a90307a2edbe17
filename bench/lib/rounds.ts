/**
 * Measured rounds: one load run against one server with the server's CPU time read before and
 * after (CPU per request is the figure that stays meaningful on a noisy machine), the order of
 * targets rotated from round to round (each takes every position, so slow drifts of the host
 * touch all of them alike), and medians over rounds.
 */
import { cpuUsOf } from './cpu.js';
import type { LoadResult, LoadSpec } from './load/types.js';
import { median } from './stats.js';
import type { TailFigures, TailProbe } from './tail-probe.js';

/** A server under measurement: where to send load, and whose CPU counts. */
export interface MeasuredServer {
  readonly url: string;
  /** The serving processes (a node server: itself; nginx: its workers). */
  pids(): readonly number[];
  /** What the server itself says of its tail (the proxy's `/metrics`); read outside its CPU count. */
  readonly probe?: TailProbe;
}

export interface Round {
  readonly load: LoadResult;
  readonly serverCpuPct: number;
  /** Server CPU per answer of any status, µs. */
  readonly serverUsPerRequest: number;
  /** The server's own account of the round, where it gives one. */
  readonly tail?: TailFigures;
}

export type LoadRunner = (spec: LoadSpec, label: string) => Promise<LoadResult>;

export async function measureRound(
  server: MeasuredServer,
  spec: LoadSpec,
  run: LoadRunner,
  label: string,
): Promise<Round> {
  const pids = server.pids();
  await server.probe?.start();
  const before = cpuUsOf(pids);
  const load = await run(spec, label);
  const after = cpuUsOf(pids);
  const tail = await server.probe?.stop();
  const serverCpuUs = before === undefined || after === undefined ? Number.NaN : after - before;
  return {
    load,
    serverCpuPct: (100 * serverCpuUs) / (load.durationSec * 1e6),
    serverUsPerRequest: serverCpuUs / Math.max(1, load.responses),
    ...(tail !== undefined && { tail }),
  };
}

/** Round `round` (from 1) of `items`, rotated by one place per round. */
export function rotation<T>(items: readonly T[], round: number): T[] {
  const shift = (round - 1) % Math.max(1, items.length);
  return [...items.slice(shift), ...items.slice(0, shift)];
}

export interface Summary {
  readonly rounds: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
  readonly serverCpuPct: number;
  readonly usPerRequest: number;
  readonly clientCpuPct: number;
  readonly bytesPerResponse: number;
  /** Summed over the rounds: answers with another status than expected, and connection errors. */
  readonly unexpected: number;
  readonly errors: number;
  /** Each round's req/s, in order. */
  readonly rpsByRound: readonly number[];
}

export function summarize(rounds: readonly Round[]): Summary {
  return {
    rounds: rounds.length,
    rps: median(rounds.map((r) => r.load.rps)),
    p50Ms: median(rounds.map((r) => r.load.p50Ms)),
    p99Ms: median(rounds.map((r) => r.load.p99Ms)),
    serverCpuPct: median(rounds.map((r) => r.serverCpuPct)),
    usPerRequest: median(rounds.map((r) => r.serverUsPerRequest)),
    clientCpuPct: median(rounds.map((r) => r.load.clientCpuPct)),
    bytesPerResponse: median(rounds.map((r) => r.load.bytesPerResponse)),
    unexpected: rounds.reduce((sum, r) => sum + r.load.unexpected, 0),
    errors: rounds.reduce((sum, r) => sum + r.load.errors, 0),
    rpsByRound: rounds.map((r) => r.load.rps),
  };
}

/** Per-round ratios of two series run back to back (they cancel slow drifts), by position. */
export function pairRatios(numerator: readonly Round[], denominator: readonly Round[]): number[] {
  const ratios: number[] = [];
  for (let i = 0; i < Math.min(numerator.length, denominator.length); i++) {
    const top = numerator[i];
    const bottom = denominator[i];
    if (top !== undefined && bottom !== undefined) ratios.push(top.load.rps / bottom.load.rps);
  }
  return ratios;
}
