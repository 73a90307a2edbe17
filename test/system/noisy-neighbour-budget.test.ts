/**
 * One company cannot take the upstream budget from another (docs/limits.md#fair-shares): company A
 * keeps 40 cold misses in flight, company B sends one cold miss at a time, through the replicas in
 * turn; the budget is 4 in flight and 40 a second for all of them, the upstream (the sandbox, in its
 * own process) takes 100 ms a page. B alone, then beside A's storm. What must hold beside it: B
 * refused nothing (no 503 it would not get alone); A got only pages or the budget's refusals; and
 * B still made at least half the misses it made alone in the same time, where its misses meet A's
 * on one replica (its turn comes every other slot; behind A's whole line, as before the fair line,
 * it made a tenth). Over three replicas the ledger serves the replicas as they ask, and each shares
 * its slots out in turn: B's replica gets a third of them, so B keeps at least half of a third
 * (docs/limits.md#fair-shares). The replicas' per-company figures count the same: every miss of B
 * granted a slot, none refused (docs/operations.md#per-company-figures). On one Redis with one
 * replica, and on a Redis Cluster with three.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { coldTargets } from '../helpers/cold-targets.js';
import { recordFigure } from '../helpers/figures.js';
import { getWithToken, send } from '../helpers/http.js';
import { closedLoop } from '../helpers/load.js';
import { parseExposition } from '../helpers/prometheus.js';
import { type Replica, startReplicas, unmetLimits, until } from '../helpers/replicas.js';
import { type SandboxProcess, startSandboxProcess } from '../helpers/sandbox-process.js';
import { type SharedRedis, settledOperatorState, startSharedRedis } from '../helpers/shared-redis.js';

const secret = 'noisy neighbour: thirty-two bytes at the very least';
const PHASE_MS = 5_000;
const STORM = 40;

interface Reader {
  readonly answers: number;
  readonly byStatus: Readonly<Record<string, number>>;
  readonly latenciesMs: readonly number[];
}

/** B: one cold miss at a time, over the replicas in turn, until `stop()`. */
async function reader(
  replicas: readonly Replica[],
  token: string,
  next: () => string,
  stop: () => boolean,
): Promise<Reader> {
  const byStatus: Record<string, number> = {};
  const latenciesMs: number[] = [];
  for (let i = 0; !stop(); i++) {
    const startedAt = performance.now();
    const res = await getWithToken(replicas[i % replicas.length]?.url ?? '', next(), token);
    latenciesMs.push(performance.now() - startedAt);
    byStatus[String(res.status)] = (byStatus[String(res.status)] ?? 0) + 1;
  }
  return { answers: latenciesMs.length, byStatus, latenciesMs };
}

/** A per-company slot count summed over the replicas' metrics. */
async function slots(replicas: readonly Replica[], company: string, result: 'granted' | 'refused'): Promise<number> {
  let sum = 0;
  for (const replica of replicas) {
    const metrics = parseExposition((await send(replica.adminUrl, '/metrics')).text);
    sum += metrics.value('slab_proxy_company_upstream_slots_total', { company, result });
  }
  return sum;
}

function p99(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(sorted.length * 0.99))] ?? Number.NaN;
}

describe.each([
  ['single', 1],
  ['cluster', 3],
] as const)('a storm of misses from one company beside another (%s Redis, %i replicas)', (topology, count) => {
  let redis: SharedRedis;
  let sandbox: SandboxProcess;
  let replicas: Replica[] = [];
  let stormToken = '';
  let readerToken = '';

  beforeAll(async () => {
    redis = await startSharedRedis(topology);
    await settledOperatorState(redis);
    sandbox = await startSandboxProcess(secret);
    await sandbox.setFaults({ latencyMs: 100 });
    stormToken = await mintDevToken({ company: 1, secret });
    readerToken = await mintDevToken({ company: 2, secret });
    replicas = await startReplicas(
      count,
      { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env },
      ['upstream: { maxConcurrent: 4, maxPerSecond: 40, maxQueueWait: 2 }', unmetLimits(count)].join('\n'),
    );
  }, 60_000);

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox?.close();
    await redis?.stop();
  });

  it("refuses B nothing beside A's storm, and B keeps at least half its replica's share of its misses", {
    timeout: 60_000,
  }, async () => {
    const readerTargets = coldTargets(20_000_000 + count * 1_000_000);
    const stormTargets = coldTargets(30_000_000 + count * 1_000_000);
    // A first request through each replica: its budget on the shared ledger before the phases.
    for (const replica of replicas)
      expect((await getWithToken(replica.url, readerTargets(), readerToken)).status).toBe(200);

    let stopAlone = false;
    const aloneTimer = setTimeout(() => {
      stopAlone = true;
    }, PHASE_MS);
    const alone = await reader(replicas, readerToken, readerTargets, () => stopAlone);
    clearTimeout(aloneTimer);

    let stormOver = false;
    const storm = closedLoop({
      connections: STORM,
      durationMs: PHASE_MS + 2_000,
      next: (i) => ({ base: replicas[i % replicas.length]?.url ?? '', path: stormTargets(), token: stormToken }),
      stopWhen: () => stormOver,
    });
    // The storm fills the budget first: B's misses come into a full one.
    await until(async () => (await sandbox.stats()).inFlight >= 4, 'the storm to fill the budget');
    let stopBeside = false;
    const besideTimer = setTimeout(() => {
      stopBeside = true;
    }, PHASE_MS);
    const beside = await reader(replicas, readerToken, readerTargets, () => stopBeside);
    clearTimeout(besideTimer);
    stormOver = true;
    const stormResult = await storm;

    recordFigure('noisy-neighbour', `${topology}, ${String(count)} replicas`, {
      alone: { answers: alone.answers, byStatus: alone.byStatus, p99Ms: p99(alone.latenciesMs) },
      beside: { answers: beside.answers, byStatus: beside.byStatus, p99Ms: p99(beside.latenciesMs) },
      storm: stormResult.byStatus,
    });
    expect(alone.byStatus).toEqual({ '200': alone.answers });
    expect(beside.byStatus).toEqual({ '200': beside.answers });
    expect(beside.answers).toBeGreaterThanOrEqual(alone.answers / (2 * count));
    expect(stormResult.errors).toBe(0);
    expect(Object.keys(stormResult.byStatus).filter((status) => status !== '200' && status !== '503')).toEqual([]);
    expect(stormResult.byStatus['200'] ?? 0).toBeGreaterThan(0);
    // Every miss of B (one warm-up request per replica, then both phases) had a slot; none refused.
    expect(await slots(replicas, '2', 'granted')).toBe(count + alone.answers + beside.answers);
    expect(await slots(replicas, '2', 'refused')).toBe(0);
    expect(await slots(replicas, '1', 'granted')).toBeGreaterThanOrEqual(stormResult.byStatus['200'] ?? 0);
    expect(await slots(replicas, '1', 'refused')).toBeGreaterThanOrEqual(stormResult.byStatus['503'] ?? 0);
  });
});
