/**
 * The noisy neighbour (docs/limits.md#fair-shares): a proxy whose upstream budget is small (4 in
 * flight, 40 a second) in front of the sandbox at 100 ms a page. Company B sends one cold request
 * at a time, first alone, then while company A keeps `STORM` cold requests in flight. The target:
 * B refused nothing beside A, and B's p99 beside A at most twice its p99 alone.
 */
import { Agent, request } from 'node:http';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { fmt, say, verdict } from '../lib/format.js';
import { sandboxControl } from '../lib/http.js';
import { LatencyHistogram } from '../lib/stats.js';

const PHASE_MS = 5_000;
const STORM = 40;
const PAGE_MS = 100;
const TARGET_P99_RATIO = 2;

/** The budget of the phase's proxy, in its config file's words. */
export const NEIGHBOUR_BUDGET = 'upstream: { maxConcurrent: 4, maxPerSecond: 40, maxQueueWait: 2 }';

export interface ReaderFigures {
  readonly answers: number;
  readonly refused: number;
  readonly p50Ms: number;
  readonly p99Ms: number;
}

export interface NeighbourFigures {
  readonly alone: ReaderFigures;
  readonly beside: ReaderFigures;
  readonly storm: Readonly<Record<string, number>>;
  readonly pass: boolean;
}

/** Targets no one asked for yet: each a miss that needs the upstream. */
function coldTargets(from: number): () => string {
  let next = 0;
  return () => {
    const i = next++;
    return `${API_PREFIX}/${RESOURCE_NAMES[i % RESOURCE_NAMES.length] ?? 'receipts'}?after_id=${String(from + i)}`;
  };
}

function getStatus(agent: Agent, base: string, path: string, authorization: string): Promise<number> {
  return new Promise((resolve) => {
    const sent = request(new URL(path, base), { agent, headers: { authorization } }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode ?? 0));
    });
    sent.on('error', () => resolve(0));
    sent.end();
  });
}

/** One cold request at a time for `ms`. */
async function reader(base: string, authorization: string, next: () => string, ms: number): Promise<ReaderFigures> {
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const latencies = new LatencyHistogram();
  let refused = 0;
  const until = performance.now() + ms;
  while (performance.now() < until) {
    const started = performance.now();
    const status = await getStatus(agent, base, next(), authorization);
    latencies.record(performance.now() - started);
    if (status !== 200) refused += 1;
  }
  agent.destroy();
  return {
    answers: latencies.count,
    refused,
    p50Ms: latencies.percentileMs(50),
    p99Ms: latencies.percentileMs(99),
  };
}

/** `STORM` cold requests in flight until `stop()`. */
async function storm(base: string, authorization: string, stop: () => boolean): Promise<Record<string, number>> {
  const agent = new Agent({ keepAlive: true, maxSockets: STORM });
  const next = coldTargets(30_000_000);
  const byStatus: Record<string, number> = {};
  await Promise.all(
    Array.from({ length: STORM }, async () => {
      while (!stop()) {
        const status = String(await getStatus(agent, base, next(), authorization));
        byStatus[status] = (byStatus[status] ?? 0) + 1;
      }
    }),
  );
  agent.destroy();
  return byStatus;
}

export async function runNoisyNeighbour(
  proxyUrl: string,
  sandboxUrl: string,
  bearer: (company: string) => string,
): Promise<NeighbourFigures> {
  await sandboxControl(sandboxUrl, 'PUT', 'faults', { latencyMs: PAGE_MS });
  const readerTargets = coldTargets(20_000_000);
  const b = bearer('2');
  const alone = await reader(proxyUrl, b, readerTargets, PHASE_MS);
  let over = false;
  const storming = storm(proxyUrl, bearer('1'), () => over);
  const beside = await reader(proxyUrl, b, readerTargets, PHASE_MS);
  over = true;
  const stormStatuses = await storming;
  await sandboxControl(sandboxUrl, 'POST', 'reset');
  const pass = beside.refused === 0 && beside.p99Ms <= TARGET_P99_RATIO * alone.p99Ms;
  say(
    `noisy neighbour: budget 4 in flight, 40/s, upstream ${String(PAGE_MS)} ms a page; B one cold request at a time, ${String(PHASE_MS / 1000)} s alone, then ${String(PHASE_MS / 1000)} s beside A's ${String(STORM)} in flight`,
  );
  const line = (name: string, r: ReaderFigures): string =>
    `  B ${name}: ${String(r.answers)} answers, ${String(r.refused)} refused, p50 ${fmt(r.p50Ms, 0)} ms, p99 ${fmt(r.p99Ms, 0)} ms`;
  say(line('alone', alone));
  say(line('beside A', beside));
  say(`  A's answers: ${JSON.stringify(stormStatuses)}`);
  say(
    `  B's p99 beside A ${fmt(beside.p99Ms / alone.p99Ms)}× alone, 0 refused (target ≤ ${String(TARGET_P99_RATIO)}×, 0): ${verdict(pass)}`,
  );
  return { alone, beside, storm: stormStatuses, pass };
}
