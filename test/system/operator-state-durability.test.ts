/**
 * Operator decisions never lapse: revocations and blocks made through one replica refuse
 * on every replica within a second, and keep refusing — every request, on every replica — through
 * a FLUSHALL, an empty restart of Redis, a failover of the master that holds them (Redis Cluster),
 * and a restart of every process with a persistent Redis for the operator state
 * (`CONTROL_REDIS_URL`). Redis gets the state back from the replicas without an operator.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { recordFigure } from '../helpers/figures.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { type Replica, type ReplicaEnv, replicaConfig, startReplica, unmetLimits, until } from '../helpers/replicas.js';
import { startSandbox } from '../helpers/sandbox.js';
import { REDIS_TOPOLOGIES, type SharedRedis, settledOperatorState, startSharedRedis } from '../helpers/shared-redis.js';

const secret = 'operator state durability: thirty-two bytes at least';
const ADMIN = 'the admin token of the durability suite';
const TARGET = `${API_PREFIX}/receipts?per_page=3`;
const CONFIG = unmetLimits(3);

function admin(base: string, method: string, path: string, body?: unknown): Promise<RawResponse> {
  return send(base, path, {
    method,
    headers: [
      ['Authorization', `Bearer ${ADMIN}`],
      ['Content-Type', 'application/json'],
    ],
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
}

interface Decisions {
  /** Tokens each decision must refuse, and the status it refuses with. */
  readonly refused: ReadonlyArray<{ readonly token: string; readonly status: 401 | 403 }>;
  /** A token no decision touches: it must keep getting 200. */
  readonly allowed: string;
}

/** Makes a jti and a sub revocation, a company and an employee block through one replica. */
async function decide(through: Replica, tag: string): Promise<Decisions> {
  const exp = Math.floor(Date.now() / 1000) + 3_600;
  const byJti = await mintDevToken({ company: 1, secret, tokenId: `jti-${tag}`, subject: `other-${tag}` });
  const bySub = await mintDevToken({ company: 1, secret, subject: `sub-${tag}` });
  const company = 40 + Math.floor(Math.random() * 1000);
  const blockedCompany = await mintDevToken({ company, secret });
  const employee = await mintDevToken({
    company: 1,
    secret,
    employee: 9,
    employeePermissions: ['view_slab', 'view_slab_logistics'],
  });
  for (const [method, path, body] of [
    ['POST', '/admin/revocations', { jti: `jti-${tag}`, exp }],
    ['POST', '/admin/revocations', { sub: `sub-${tag}` }],
    ['PUT', `/admin/blocks/companies/${String(company)}`, undefined],
    ['PUT', '/admin/blocks/employees/1/9', undefined],
  ] as const) {
    const res = await admin(through.adminUrl, method, path, body);
    expect(res.status).toBeLessThan(300);
  }
  return {
    refused: [
      { token: byJti, status: 401 },
      { token: bySub, status: 401 },
      { token: blockedCompany, status: 403 },
      { token: employee, status: 403 },
    ],
    allowed: await mintDevToken({ company: 1, secret, subject: `fine-${tag}` }),
  };
}

/** Every refused token on every replica, once: the statuses that were wrong. */
async function violations(replicas: readonly Replica[], decisions: Decisions): Promise<string[]> {
  const wrong: string[] = [];
  await Promise.all(
    replicas.flatMap((replica, r) =>
      decisions.refused.map(async ({ token, status }, i) => {
        const answer = await getWithToken(replica.url, TARGET, token);
        if (answer.status !== status)
          wrong.push(`replica ${String(r + 1)}, decision ${String(i + 1)}: ${String(answer.status)}`);
      }),
    ),
  );
  return wrong;
}

/**
 * Checks every decision on every replica, round after round, while `disrupt` runs and until
 * `recovered` holds: no answer may ever have been other than the refusal.
 */
async function refusedThroughout(
  replicas: readonly Replica[],
  decisions: Decisions,
  disrupt: () => Promise<void>,
  recovered: () => Promise<boolean>,
): Promise<{ rounds: number; wrong: string[] }> {
  let stop = false;
  let rounds = 0;
  const wrong: string[] = [];
  const checking = (async () => {
    while (!stop) {
      wrong.push(...(await violations(replicas, decisions)));
      rounds += 1;
    }
  })();
  try {
    await disrupt();
    await until(recovered, 'Redis to hold the operator state again', 20_000);
    wrong.push(...(await violations(replicas, decisions)));
  } finally {
    stop = true;
    await checking;
  }
  return { rounds, wrong };
}

describe.each(REDIS_TOPOLOGIES)('operator decisions through Redis failures (%s Redis)', (topology) => {
  let redis: SharedRedis;
  let sandbox: Sandbox;
  let replicas: Replica[] = [];
  let env: ReplicaEnv;
  let decisions: Decisions;

  beforeAll(async () => {
    redis = await startSharedRedis(topology);
    await settledOperatorState(redis);
    sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
    env = {
      UPSTREAM_URL: sandbox.url,
      JWT_SECRET: secret,
      ADMIN_TOKEN: ADMIN,
      CONFIG_FILE: replicaConfig(CONFIG),
      ...redis.env,
    };
    replicas = await Promise.all([1, 2, 3].map(() => startReplica(env)));
  });

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox?.close();
    await redis?.stop();
  });

  /** The state is back in Redis: read straight from Redis, every decision is there. */
  async function redisHoldsDecisions(): Promise<boolean> {
    const client = redis.client();
    try {
      const fields = await client.hkeys('{slab:ctl}:state');
      return ['jti:', 'sub:', 'co:', 'em:'].every((kind) => fields.some((f) => f.startsWith(kind)));
    } catch {
      return false;
    } finally {
      client.disconnect();
    }
  }

  it('refuses on every replica within a second of the change', async () => {
    const [one] = replicas as [Replica];
    const started = Date.now();
    decisions = await decide(one, topology);
    await until(async () => (await violations(replicas, decisions)).length === 0, 'every replica to refuse', 1_000);
    recordFigure('operator-state', `${topology}: reach every replica`, { ms: Date.now() - started });
    expect((await getWithToken(replicas[1]?.url ?? '', TARGET, decisions.allowed)).status).toBe(200);
  });

  it('a TTL override and a purge made through one replica reach the others within a second', async () => {
    const [one, , three] = replicas as [Replica, Replica, Replica];
    const reader = await mintDevToken({ company: 1, secret, subject: `ttl-${topology}` });
    const page = `${API_PREFIX}/stocktakes?per_page=7`;
    await getWithToken(three.url, page, reader);
    expect((await getWithToken(three.url, page, reader)).headers['cache-status']).toMatch(
      /^slab-proxy; hit; ttl=(29|30)$/,
    );
    const started = Date.now();
    expect((await admin(one.adminUrl, 'PUT', '/admin/cache/ttl/stocktakes', { ttl: 600 })).status).toBe(200);
    await until(
      async () =>
        /^slab-proxy; hit; ttl=59\d$/.test((await getWithToken(three.url, page, reader)).headers['cache-status'] ?? ''),
      'the override on replica 3',
      1_000,
    );
    expect(
      (await admin(one.adminUrl, 'POST', '/admin/cache/purge', { company_id: 1, resource: 'stocktakes' })).status,
    ).toBe(200);
    await until(
      async () => /fwd=miss/.test((await getWithToken(three.url, page, reader)).headers['cache-status'] ?? ''),
      'the purge on replica 3',
      1_000,
    );
    recordFigure('operator-state', `${topology}: TTL override and purge reach replica 3`, { ms: Date.now() - started });
    expect((await admin(one.adminUrl, 'DELETE', '/admin/cache/ttl/stocktakes')).status).toBe(204);
  });

  it('keeps refusing through a FLUSHALL, and writes the state back', async () => {
    const result = await refusedThroughout(replicas, decisions, () => redis.flushAll(), redisHoldsDecisions);
    recordFigure('operator-state', `${topology}: FLUSHALL`, result);
    expect(result.wrong).toEqual([]);
    expect(result.rounds).toBeGreaterThan(0);
  });

  it('keeps refusing through an empty restart of Redis, and writes the state back', async () => {
    const restart = async (): Promise<void> => {
      if (redis.server !== undefined) await redis.server.restart();
      if (redis.cluster !== undefined) {
        for (const node of redis.cluster.nodes) await redis.cluster.restart(node);
        await redis.cluster.waitHealthy();
      }
    };
    const result = await refusedThroughout(replicas, decisions, restart, redisHoldsDecisions);
    recordFigure('operator-state', `${topology}: empty restart`, result);
    expect(result.wrong).toEqual([]);
  });

  // A cluster only: one Redis has no replica to fail over to (its empty restart is above).
  if (topology === 'cluster')
    it('keeps refusing through a failover of the master that holds the state', async () => {
      const cluster = redis.cluster;
      if (cluster === undefined) throw new Error('a cluster was asked for');
      const master = await cluster.masterOf('{slab:ctl}');
      const result = await refusedThroughout(
        replicas,
        decisions,
        async () => {
          await cluster.kill(master);
          await cluster.waitHealthy();
        },
        redisHoldsDecisions,
      );
      recordFigure('operator-state', `${topology}: failover`, result);
      expect(result.wrong).toEqual([]);
      await cluster.restart(master); // back as a replica
      await cluster.waitHealthy();
    });

  it('a replica started after all that knows every decision', async () => {
    const late = await startReplica(env);
    try {
      expect(await violations([late], decisions)).toEqual([]);
      expect((await getWithToken(late.url, TARGET, decisions.allowed)).status).toBe(200);
    } finally {
      await late.process.stop('SIGKILL');
    }
  });
});

describe('operator decisions through a restart of every process (a persistent Redis for the operator state)', () => {
  let cacheRedis: RedisServer;
  let controlRedis: RedisServer;
  let sandbox: Sandbox;
  let replicas: Replica[] = [];
  let env: ReplicaEnv;

  beforeAll(async () => {
    cacheRedis = await startRedis();
    controlRedis = await startRedis({ appendOnlyDir: mkdtempSync(join(tmpdir(), 'slab-control-aof-')) });
    await settledOperatorState(controlRedis);
    sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
    env = {
      UPSTREAM_URL: sandbox.url,
      JWT_SECRET: secret,
      ADMIN_TOKEN: ADMIN,
      CONFIG_FILE: replicaConfig(CONFIG),
      REDIS_URL: cacheRedis.url,
      CONTROL_REDIS_URL: controlRedis.url,
    };
    replicas = await Promise.all([1, 2, 3].map(() => startReplica(env)));
  });

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox?.close();
    await cacheRedis?.stop();
    await controlRedis?.stop();
  });

  it('still refuses on every replica after every replica and both Redis servers were killed and started again', async () => {
    const [one] = replicas as [Replica];
    const decisions = await decide(one, 'restart-all');
    await until(async () => (await violations(replicas, decisions)).length === 0, 'every replica to refuse', 1_000);
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await Promise.all([cacheRedis.restart(), controlRedis.restart()]); // the cache empty, the operator state from its file
    replicas = await Promise.all([1, 2, 3].map(() => startReplica(env)));
    expect(await violations(replicas, decisions)).toEqual([]);
    expect((await getWithToken(replicas[0]?.url ?? '', TARGET, decisions.allowed)).status).toBe(200);
  });
});
