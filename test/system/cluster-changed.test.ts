/**
 * The fleet's guarantees on a Redis Cluster that has changed since it was created: a
 * real 3+3 cluster on fixed ports, replicas given the three first masters as seed nodes, the way an
 * operator configures them once.
 *
 * - A replica started while the whole cluster is down refuses reads (503 `operator_state_
 *   unavailable`) and says so on `/readyz` until it has read the operator state, and never
 *   answers a revoked token 200; once the cluster is back (empty), the replicas that knew the state
 *   write it back and it reads it.
 * - After every original master was killed in turn (each back as a replica), a replica started on
 *   those seeds connects, honours the revocations and blocks within 10 s and shares its changes.
 * - Every proxy restarted after that: nothing made earlier lapses.
 * - A whole-cluster outage of ~6 s, back empty: every replica shares operator changes again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { recordFigure } from '../helpers/figures.js';
import { getWithToken, send } from '../helpers/http.js';
import { type Replica, type ReplicaEnv, redisOk, replicaConfig, startReplica, until } from '../helpers/replicas.js';
import { startSandbox } from '../helpers/sandbox.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { freePorts } from '../support/free-port.js';
import { type ClusterNode, type RedisCluster, startRedisCluster } from '../support/redis-cluster.js';

const secret = 'cluster changed: thirty-two bytes at least, surely';
const ADMIN = 'the admin token of the changed-cluster suite';
const TARGET = `${API_PREFIX}/receipts?per_page=2`;
const REVOKED_SUB = 'changed-revoked';
const BLOCKED_COMPANY = '7';

let sandbox: Sandbox;
let cluster: RedisCluster;
let seeds: readonly ClusterNode[] = [];
const live = new Set<Replica>();
let revoked = '';
let reader = '';
let blocked = '';

beforeAll(async () => {
  sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
  const ports = await freePorts(6);
  cluster = await startRedisCluster({ ports });
  await settledOperatorState(cluster);
  seeds = await cluster.masters();
  revoked = await mintDevToken({ company: 1, secret, subject: REVOKED_SUB });
  reader = await mintDevToken({ company: 1, secret, subject: 'changed-reader' });
  blocked = await mintDevToken({ company: Number(BLOCKED_COMPANY), secret, subject: 'changed-blocked' });
});

afterAll(async () => {
  await Promise.all([...live].map((r) => r.process.stop('SIGKILL')));
  await sandbox?.close();
  await cluster?.stop();
});

function env(): ReplicaEnv {
  return {
    UPSTREAM_URL: sandbox.url,
    JWT_SECRET: secret,
    ADMIN_TOKEN: ADMIN,
    REDIS_CLUSTER_NODES: seeds.map((node) => node.address).join(','),
    CONFIG_FILE: replicaConfig(''),
  };
}

async function launch(waitForRedis = true): Promise<Replica> {
  const replica = await startReplica(env(), { waitForRedis });
  live.add(replica);
  return replica;
}

async function stop(replica: Replica): Promise<void> {
  live.delete(replica);
  await replica.process.stop('SIGTERM');
}

async function admin(replica: Replica, method: string, path: string, body?: unknown): Promise<number> {
  const res = await send(replica.adminUrl, path, {
    method,
    headers: [
      ['Authorization', `Bearer ${ADMIN}`],
      ['Content-Type', 'application/json'],
    ],
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
  return res.status;
}

async function readiness(replica: Replica): Promise<{ code: number; status: string }> {
  const res = await send(replica.adminUrl, '/readyz');
  return { code: res.status, status: (res.json() as { status: string }).status };
}

const statusOf = async (replica: Replica, token: string): Promise<number> =>
  (await getWithToken(replica.url, TARGET, token)).status;

/** Every replica answers the revoked token 401 and the blocked company 403. */
async function refusalsHeld(replicas: readonly Replica[]): Promise<boolean> {
  for (const replica of replicas) {
    if ((await statusOf(replica, revoked)) !== 401) return false;
    if ((await statusOf(replica, blocked)) !== 403) return false;
  }
  return true;
}

/** The refusals, and a reader served (200) by every replica. */
async function decisionsHeld(replicas: readonly Replica[]): Promise<boolean> {
  if (!(await refusalsHeld(replicas))) return false;
  for (const replica of replicas) if ((await statusOf(replica, reader)) !== 200) return false;
  return true;
}

async function killWholeCluster(): Promise<void> {
  await Promise.all(cluster.nodes.map((node) => cluster.kill(node)));
}

async function restartWholeCluster(): Promise<void> {
  await Promise.all(cluster.nodes.map((node) => cluster.restart(node)));
  await cluster.waitHealthy();
}

describe('a replica and a Redis Cluster that has changed', () => {
  let first: Replica;
  let unread: Replica;

  it('a replica started while the whole cluster is down refuses reads until it has read the operator state', {
    timeout: 60_000,
  }, async () => {
    first = await launch();
    expect(await admin(first, 'POST', '/admin/revocations', { sub: REVOKED_SUB })).toBe(201);
    expect(await admin(first, 'PUT', `/admin/blocks/companies/${BLOCKED_COMPANY}`)).toBe(200);
    await until(() => decisionsHeld([first]), 'the decisions on the first replica');

    await killWholeCluster();
    unread = await launch(false);
    const ready = await readiness(unread);
    expect(ready).toEqual({ code: 503, status: 'unconfirmed' });
    const refused = await getWithToken(unread.url, TARGET, reader);
    expect(refused.status).toBe(503);
    expect((refused.json() as { code: string }).code).toBe('operator_state_unavailable');
    expect(refused.headers['retry-after']).toBe('1');

    // Through the outage and the return of an empty cluster, the revoked token is never served.
    const answers: number[] = [];
    let watching = true;
    const watch = (async () => {
      while (watching) answers.push(await statusOf(unread, revoked));
    })();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    await restartWholeCluster();
    const backAt = Date.now();
    await until(async () => (await readiness(unread)).code === 200, 'the unread replica to read the state', 20_000);
    recordFigure('cluster-changed', 'unread replica ready after the cluster came back', { ms: Date.now() - backAt });
    watching = false;
    await watch;
    expect(answers.length).toBeGreaterThan(0);
    expect(answers.filter((status) => status !== 503 && status !== 401)).toEqual([]);
    await until(() => decisionsHeld([first, unread]), 'the decisions on both replicas', 10_000);
  });

  it('after every original master failed over, a replica on those seeds connects and honours the decisions within 10 s', {
    timeout: 120_000,
  }, async () => {
    for (const master of seeds) {
      await cluster.kill(master);
      await cluster.waitHealthy();
      await cluster.restart(master); // back as a replica
      await cluster.waitHealthy();
    }
    const now = await cluster.masters();
    expect(now.some((node) => seeds.some((seed) => seed.port === node.port))).toBe(false);

    const startedAt = Date.now();
    const late = await launch(false);
    await until(() => decisionsHeld([late]), 'the decisions on the late replica', 10_000);
    recordFigure('cluster-changed', 'replica on seeds turned replicas honours decisions', {
      ms: Date.now() - startedAt,
    });
    expect(await redisOk(late)).toBe(true);
    // Its changes reach the others, and theirs reach it.
    const other = await mintDevToken({ company: 1, secret, subject: 'changed-late-revoked' });
    expect(await admin(late, 'POST', '/admin/revocations', { sub: 'changed-late-revoked' })).toBe(201);
    await until(async () => (await statusOf(first, other)) === 401, 'the late replica’s revocation elsewhere', 2_000);
    expect(await admin(first, 'DELETE', '/admin/revocations/sub/changed-late-revoked')).toBe(204);
    await until(async () => (await statusOf(late, other)) === 200, 'the lifted revocation on the late replica', 2_000);
  });

  it('every proxy restarted after those failovers: no decision lapses', { timeout: 60_000 }, async () => {
    await Promise.all([...live].map(stop));
    const restarted = await Promise.all([launch(), launch()]);
    expect(await decisionsHeld(restarted)).toBe(true);
  });

  it('a whole-cluster outage of ~6 s and an empty return: every replica shares operator changes again', {
    timeout: 60_000,
  }, async () => {
    const replicas = [...live];
    await killWholeCluster();
    await new Promise((resolve) => setTimeout(resolve, 6_000));
    await restartWholeCluster();
    const backAt = Date.now();
    await until(
      async () => (await Promise.all(replicas.map(redisOk))).every(Boolean),
      'every replica connected',
      10_000,
    );
    // The state, lost with the cluster, is written back from what the replicas knew; they held it
    // all along. Readers are served again once the upstream budget's new epoch opens.
    expect(await refusalsHeld(replicas)).toBe(true);
    await until(() => decisionsHeld(replicas), 'readers served again', 10_000);
    const [by, ...others] = replicas;
    if (by === undefined) throw new Error('no replica');
    const later = await mintDevToken({ company: 1, secret, subject: 'changed-after-outage' });
    expect(await admin(by, 'POST', '/admin/revocations', { sub: 'changed-after-outage' })).toBe(201);
    await until(
      async () => (await Promise.all(others.map((r) => statusOf(r, later)))).every((status) => status === 401),
      'the change on every other replica',
      2_000,
    );
    recordFigure('cluster-changed', 'changes shared again after a whole-cluster outage', { ms: Date.now() - backAt });
  });
});
