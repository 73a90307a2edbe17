/**
 * Coalescing exactly once across replicas: 300 concurrent cold requests for each of 20
 * keys, spread over 3 replicas, with an upstream that answers at once (0 ms, the hardest case: a
 * fill can be over before the other replicas even asked) — exactly 20 upstream requests, every run,
 * on one Redis and on a Redis Cluster.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { recordFigure } from '../helpers/figures.js';
import { getWithToken } from '../helpers/http.js';
import { type Replica, startReplicas, unmetLimits } from '../helpers/replicas.js';
import { startSandbox } from '../helpers/sandbox.js';
import { REDIS_TOPOLOGIES, type SharedRedis, settledOperatorState, startSharedRedis } from '../helpers/shared-redis.js';

const secret = 'coalescing exactly once: thirty-two bytes at least';
const KEYS = 20;
const PER_KEY = 300;
const RUNS = 5;

describe.each(REDIS_TOPOLOGIES)('coalescing across 3 replicas (%s Redis)', (topology) => {
  let redis: SharedRedis;
  let sandbox: Sandbox;
  let replicas: Replica[] = [];

  beforeAll(async () => {
    redis = await startSharedRedis(topology);
    await settledOperatorState(redis);
    sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
    replicas = await startReplicas(3, { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env }, unmetLimits(3));
  });

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox?.close();
    await redis?.stop();
  });

  it(`makes exactly one upstream request per key, ${String(RUNS)} runs out of ${String(RUNS)}`, {
    timeout: 120_000,
  }, async () => {
    const token = await mintDevToken({ company: 1, secret });
    const upstreamPerRun: number[] = [];
    const refusedPerRun: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      const targets = Array.from(
        { length: KEYS },
        (_, k) =>
          `${API_PREFIX}/${RESOURCE_NAMES[k % RESOURCE_NAMES.length] ?? 'receipts'}?after_id=${String(run * 1_000 + k)}`,
      );
      sandbox.resetStats();
      const answers = await Promise.all(
        Array.from({ length: KEYS * PER_KEY }, (_, i) =>
          getWithToken(replicas[i % replicas.length]?.url ?? '', targets[i % KEYS] ?? '', token),
        ),
      );
      // A page, or — when this 2-core machine is starved by the burst (6 000 connections at once,
      // every process on the same cores) and a fill's wait for an upstream slot runs past
      // `upstream.maxQueueWait` — the budget's refusal. Never anything else.
      const other = answers.filter((a) => a.status !== 200);
      for (const answer of other) {
        expect(answer.status).toBe(503);
        expect(answer.json()).toMatchObject({ code: 'upstream_unavailable' });
      }
      refusedPerRun.push(other.length);
      upstreamPerRun.push(sandbox.stats().served);
    }
    recordFigure('coalescing', `${topology}: upstream requests per run (${String(KEYS)} keys)`, {
      upstreamPerRun,
      refusedPerRun,
    });
    expect(upstreamPerRun).toEqual(Array.from({ length: RUNS }, () => KEYS));
  });
});
