/**
 * How a variant is timed: batches of requests, each one synchronous call of the data plane with a
 * fake socket, timed with `process.hrtime.bigint()` (GC included), the event loop turning between
 * batches (the batch processor exports there); the mean µs per hit over a variant's time in a
 * round. Every variant answers hits before anything is measured, and each takes every position
 * in turn over the rounds.
 */
import { ServerResponse } from 'node:http';
import { Socket } from 'node:net';
import { setImmediate as turn } from 'node:timers/promises';
import { makeRequest } from '../../lib/parsed-request.js';
import type { Variant } from './variants.js';

const BATCH = 256;

/** Results are written here so that the compiler cannot drop the work being measured. */
export let sink: unknown;

/** What the request log counted so far: every answer, and the answers that were not hits. */
export interface AnswerCounts {
  readonly answered: () => number;
  readonly notHits: () => number;
}

export interface RoundSettings {
  readonly rounds: number;
  /** Measured time per variant and round, ms. */
  readonly msPerVariant: number;
}

/** Fills each variant's `means`: one mean µs per hit per round. */
export async function measureInRounds(
  variants: readonly Variant[],
  paths: readonly string[],
  counts: AnswerCounts,
  { rounds, msPerVariant }: RoundSettings,
): Promise<void> {
  const socket = new Socket();
  let i = 0;
  const batch = (variant: Variant): bigint => {
    const started = process.hrtime.bigint();
    for (let j = 0; j < BATCH; j++, i++) {
      const req = makeRequest(socket, paths[i % paths.length] ?? '', variant.headers);
      const res = new ServerResponse(req);
      variant.plane(req, res);
      sink = res;
    }
    variant.requests += BATCH;
    return process.hrtime.bigint() - started;
  };
  const measure = async (variant: Variant, forMs: number): Promise<number> => {
    const budget = BigInt(Math.round(forMs * 1e6));
    let total = 0n;
    let calls = 0;
    while (total < budget) {
      total += batch(variant);
      calls += BATCH;
      await turn();
    }
    return Number(total) / 1e3 / calls;
  };

  // Every variant answers hits, synchronously, before anything is measured.
  for (const variant of variants) {
    const before = counts.answered();
    batch(variant);
    if (counts.answered() - before !== BATCH || counts.notHits() > 0)
      throw new Error(`tracing-cost: ${variant.name} did not answer every request as a hit`);
  }
  for (const variant of variants) await measure(variant, 150);
  for (let round = 0; round < rounds; round++) {
    // Each variant takes every position in turn: drift over the run does not favour one.
    for (let k = 0; k < variants.length; k++) {
      const variant = variants[(round + k) % variants.length] as Variant;
      variant.means.push(await measure(variant, msPerVariant));
      if (counts.notHits() > 0)
        throw new Error(`tracing-cost: ${counts.notHits()} answers of ${variant.name} were not hits`);
    }
  }
}
