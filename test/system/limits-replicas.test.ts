/**
 * Inbound limits shared by two proxy processes through one real Redis, and through a real Redis
 * Cluster: a credential and a company get their points per window in total, not per replica; with
 * Redis killed each replica falls back to its share (points / replicas), nothing fails, and the
 * shared count returns with Redis.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { getWithToken, send } from '../helpers/http.js';
import { type Replica, redisOk, replicasCounted, startReplicas, until } from '../helpers/replicas.js';
import { startSandbox } from '../helpers/sandbox.js';
import { REDIS_TOPOLOGIES, type SharedRedis, settledOperatorState, startSharedRedis } from '../helpers/shared-redis.js';

const secret = 'limits across replicas: a secret of at least thirty-two bytes';
const TARGET = `${API_PREFIX}/warehouses`;

/**
 * The inbound limits under test; and the upstream budget's opt-out (`budgetCutOff: share`), so that
 * reads reach the upstream while Redis is away and what refuses them is only ever the limits.
 */
const LIMITS =
  'rateLimit:\n  perCredential: { points: 10, duration: 60 }\n  perCompany: { points: 30, duration: 60 }\n  replicas: 2\nupstream: { budgetCutOff: share }\n';

/** Sends `count` requests, one after another, and counts the answers by status. */
async function burst(replica: Replica, bearer: string, count: number): Promise<Record<number, number>> {
  const statuses: Record<number, number> = {};
  for (let i = 0; i < count; i++) {
    const { status } = await getWithToken(replica.url, TARGET, bearer);
    statuses[status] = (statuses[status] ?? 0) + 1;
  }
  return statuses;
}

function tokenFor(subject: string, company = 1): Promise<string> {
  return mintDevToken({ company, subject, secret });
}

/** Two replicas on a Redis of the given shape, for the suite that calls it. */
function withReplicas(topology: 'single' | 'cluster'): { replicas: Replica[]; redis: () => SharedRedis } {
  const replicas: Replica[] = [];
  let redis: SharedRedis | undefined;
  let sandbox: Sandbox | undefined;
  beforeAll(async () => {
    redis = await startSharedRedis(topology);
    await settledOperatorState(redis);
    sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
    replicas.push(...(await startReplicas(2, { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env }, LIMITS)));
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox?.close();
    await redis?.stop();
  });
  return {
    replicas,
    redis: () => {
      if (redis === undefined) throw new Error('not started');
      return redis;
    },
  };
}

describe.each(REDIS_TOPOLOGIES)('limits shared through Redis (%s)', (topology) => {
  const { replicas } = withReplicas(topology);

  it('a credential gets its points once in total, not once per replica', async () => {
    const [one, two] = replicas as [Replica, Replica];
    const bearer = await tokenFor('shared-1');
    const answers = await Promise.all([burst(one, bearer, 12), burst(two, bearer, 12)]);
    const allowed = (answers[0][200] ?? 0) + (answers[1][200] ?? 0);
    const refused = (answers[0][429] ?? 0) + (answers[1][429] ?? 0);
    expect(allowed).toBe(10);
    expect(refused).toBe(14);
  });

  it('the whole allowance is usable through one replica (the shared count, not a share)', async () => {
    const [one] = replicas as [Replica, Replica];
    expect(await burst(one, await tokenFor('shared-2'), 12)).toEqual({ 200: 10, 429: 2 });
  });

  it('a company gets its points in total across its credentials and the replicas', async () => {
    const [one, two] = replicas as [Replica, Replica];
    const company = 3;
    const results = await Promise.all(
      ['a', 'b', 'c', 'd'].map(async (sub, i) =>
        burst(i % 2 === 0 ? one : two, await tokenFor(`co-${sub}`, company), 10),
      ),
    );
    const allowed = results.reduce((sum, r) => sum + (r[200] ?? 0), 0);
    // 40 asked, 10 per credential allowed by that policy, 30 by the company's.
    expect(allowed).toBe(30);
    // Another company is untouched.
    expect(await burst(one, await tokenFor('co-a', 2), 1)).toEqual({ 200: 1 });
  });
});

describe('limits with Redis gone', () => {
  const { replicas, redis: shared } = withReplicas('single');
  it('each replica enforces its share (points / replicas) while Redis is down, never a 5xx, then shares again', async () => {
    const [one, two] = replicas as [Replica, Replica];
    const redis = shared().server;
    if (redis === undefined) throw new Error('one Redis was asked for');
    await replicasCounted(replicas); // what each one's share is made of
    await redis.kill();
    const down1 = await burst(one, await tokenFor('down-1'), 12);
    const down2 = await burst(two, await tokenFor('down-1'), 12);
    expect(down1).toEqual({ 200: 5, 429: 7 });
    expect(down2).toEqual({ 200: 5, 429: 7 });
    await redis.restart();
    await until(async () => (await redisOk(one)) && (await redisOk(two)), 'both replicas to report redis ok again');
    expect(await burst(one, await tokenFor('back-1'), 12)).toEqual({ 200: 10, 429: 2 });
  });
});

describe('the local share follows the replicas counted through Redis', () => {
  const replicas: Replica[] = [];
  let redis: SharedRedis | undefined;
  let sandbox: Sandbox | undefined;
  beforeAll(async () => {
    redis = await startSharedRedis('single');
    await settledOperatorState(redis);
    sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
    // The config says one replica; three run: the count, not the config, makes the share.
    const config =
      'rateLimit:\n  perCredential: { points: 30, duration: 60 }\n  perCompany: { points: 300, duration: 60 }\n  replicas: 1\nupstream: { budgetCutOff: share }\n';
    replicas.push(...(await startReplicas(3, { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env }, config)));
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox?.close();
    await redis?.stop();
  });

  it('with Redis gone each of 3 replicas allows points / 3, though the config says 1 replica', async () => {
    const counted = async (replica: Replica): Promise<boolean> => {
      const ready = await send(replica.adminUrl, '/readyz');
      return (ready.json() as { replicas?: number }).replicas === 3;
    };
    for (const replica of replicas) await until(() => counted(replica), 'every replica to count 3 replicas', 10_000);
    await redis?.server?.kill();
    const [one] = replicas as [Replica];
    expect(await burst(one, await tokenFor('counted-share'), 12)).toEqual({ 200: 10, 429: 2 });
  });
});
