/**
 * A replica never stays cut off, and says so while it is. A replica started while
 * its Redis Cluster is unreachable refuses reads (503 `unconfirmed`: it has read no operator state),
 * or, opted out (`control.unconfirmed: serve`, `upstream.budgetCutOff: share`), serves degraded; both
 * show how long they have been without Redis and how old their operator state is, on `/readyz` and
 * `/metrics`. Once the cluster is up they connect by themselves, and operator decisions made
 * elsewhere reach them. A replica started after failovers, with seed nodes that are now replicas,
 * connects as well. With `control.maxStaleness` set, a replica whose operator state is too old
 * answers `/readyz` 503 `stale` until it is current again.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { recordFigure } from '../helpers/figures.js';
import { getWithToken, send } from '../helpers/http.js';
import { parseExposition } from '../helpers/prometheus.js';
import { type Replica, type ReplicaEnv, redisOk, replicaConfig, startReplica, until } from '../helpers/replicas.js';
import { startSandbox } from '../helpers/sandbox.js';
import { freePorts } from '../support/free-port.js';
import { type RedisCluster, startRedisCluster } from '../support/redis-cluster.js';

const secret = 'replica reconnect: thirty-two bytes at least, surely';
const ADMIN = 'the admin token of the reconnect suite';
const TARGET = `${API_PREFIX}/receipts?per_page=2`;

let sandbox: Sandbox;
let cluster: RedisCluster | undefined;
const ports: number[] = [];
const started: Replica[] = [];

interface Readiness {
  readonly status: string;
  readonly redis: string;
  readonly operator_state: { readonly age_seconds?: number };
}

async function readiness(replica: Replica): Promise<{ code: number; body: Readiness }> {
  const res = await send(replica.adminUrl, '/readyz');
  return { code: res.status, body: res.json() as Readiness };
}

async function gauge(replica: Replica, name: string): Promise<number | undefined> {
  return parseExposition((await send(replica.adminUrl, '/metrics')).text).samples.get(name);
}

beforeAll(async () => {
  sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
  ports.push(...(await freePorts(6)));
});

afterAll(async () => {
  // Every replica lived through it all: none stopped on its own (an exit code is a crash).
  for (const replica of started) expect(replica.process.child.exitCode).toBeNull();
  await Promise.all(started.map((r) => r.process.stop('SIGKILL')));
  await sandbox?.close();
  await cluster?.stop();
});

function env(config = ''): ReplicaEnv {
  return {
    UPSTREAM_URL: sandbox.url,
    JWT_SECRET: secret,
    ADMIN_TOKEN: ADMIN,
    REDIS_CLUSTER_NODES: ports.map((port) => `127.0.0.1:${String(port)}`).join(','),
    CONFIG_FILE: replicaConfig(config),
  };
}

async function launch(config = '', waitForRedis = true): Promise<Replica> {
  const replica = await startReplica(env(config), { waitForRedis });
  started.push(replica);
  return replica;
}

/** Serves without Redis: reads before the operator state is read, and misses reach the upstream. */
const OPTED_OUT = 'control: { unconfirmed: serve }\nupstream: { budgetCutOff: share }\n';

describe('a replica and an unreachable Redis Cluster', () => {
  let early: Replica;
  let strict: Replica;
  let unread: Replica;

  it('refuses reads until it has read the operator state; opted out, serves degraded; both say for how long', {
    timeout: 30_000,
  }, async () => {
    // Started together: each waits out its start's bound on the wait for Redis, none for another.
    [early, strict, unread] = await Promise.all([
      launch(OPTED_OUT, false),
      launch('control: { maxStaleness: 1, unconfirmed: serve }\n', false),
      launch('', false),
    ]);
    const reader = await mintDevToken({ company: 1, secret });
    expect((await getWithToken(early.url, TARGET, reader)).status).toBe(200); // fail-open to the upstream
    const refused = await getWithToken(unread.url, TARGET, reader);
    expect(refused.status).toBe(503);
    expect((refused.json() as { code: string }).code).toBe('operator_state_unavailable');
    expect((await readiness(unread)).body.status).toBe('unconfirmed');
    await until(
      async () => ((await gauge(early, 'slab_proxy_redis_down_seconds')) ?? 0) >= 1,
      'redis down for a second',
      5_000,
    );
    const ready = await readiness(early);
    expect(ready.code).toBe(200);
    expect(ready.body.redis).toBe('down');
    expect(ready.body.operator_state.age_seconds).toBeGreaterThanOrEqual(1);
    expect(await gauge(early, 'slab_proxy_operator_state_age_seconds')).toBeGreaterThanOrEqual(1);
    // The replica that asked for it leaves the load balancer while its state is unconfirmed.
    await until(async () => (await readiness(strict)).code === 503, 'the strict replica to be unready', 5_000);
    expect((await readiness(strict)).body.status).toBe('stale');
  });

  it('connects by itself once the cluster is up, and operator decisions reach it', { timeout: 60_000 }, async () => {
    cluster = await startRedisCluster({ ports });
    const upAt = Date.now();
    await until(() => redisOk(early), 'the early replica to connect', 20_000);
    recordFigure('replica-reconnect', 'connected after the cluster came up', { ms: Date.now() - upAt });
    expect(await gauge(early, 'slab_proxy_redis_down_seconds')).toBe(0);
    await until(async () => (await readiness(strict)).code === 200, 'the strict replica to be ready again', 20_000);
    await until(async () => (await readiness(unread)).code === 200, 'the unread replica to read the state', 20_000);

    const late = await launch();
    const revoked = await mintDevToken({ company: 1, secret, subject: 'reconnect-revoked' });
    const res = await send(late.adminUrl, '/admin/revocations', {
      method: 'POST',
      headers: [
        ['Authorization', `Bearer ${ADMIN}`],
        ['Content-Type', 'application/json'],
      ],
      body: JSON.stringify({ sub: 'reconnect-revoked' }),
    });
    expect(res.status).toBe(201);
    await until(
      async () => (await getWithToken(early.url, TARGET, revoked)).status === 401,
      'the revocation on the early replica',
      1_000,
    );
  });

  it('a replica started after failovers, its seed nodes now replicas, connects', { timeout: 60_000 }, async () => {
    if (cluster === undefined) throw new Error('the cluster was not started');
    for (let round = 0; round < 2; round++) {
      const [master] = await cluster.masters();
      if (master === undefined) throw new Error('no master');
      await cluster.kill(master);
      await cluster.waitHealthy();
      await cluster.restart(master); // back as a replica
      await cluster.waitHealthy();
    }
    const after = await launch();
    expect(await redisOk(after)).toBe(true);
    expect(
      (await getWithToken(after.url, TARGET, await mintDevToken({ company: 1, secret, subject: 'reconnect-revoked' })))
        .status,
    ).toBe(401);
  });
});
