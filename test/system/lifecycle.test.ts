/**
 * Readiness, graceful shutdown and reload (docs/operations.md#reload-start-and-shutdown), on the real entry point (`node
 * dist/main.js`) with a real Redis and the sandbox over HTTP: `SIGTERM` during slow upstream
 * requests lets them finish while `/readyz` says 503 and new connections are refused, then exits
 * 0; a kept-alive connection is closed once answered instead of holding the drain; a request
 * whose headers were still arriving when the drain began gets 503 `shutting_down`; `SIGHUP`
 * applies a changed file and keeps the old settings when the new file is bad; with
 * `SHUTDOWN_DELAY_SECONDS`, `/readyz` turns 503 at once while the client port serves on for the delay.
 */

import { once } from 'node:events';
import { writeFileSync } from 'node:fs';
import { connect, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { runNode } from '../helpers/process.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { type Replica, replicaConfig, startReplica, until } from '../helpers/replicas.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { freePort } from '../support/free-port.js';

const secret = 'lifecycle tests: a secret of at least thirty-two bytes';
let sandbox: Sandbox;
let redis: RedisServer;
let reader: string;

beforeAll(async () => {
  sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
  redis = await startRedis();
  await settledOperatorState(redis);
  reader = await mintDevToken({ company: 1, subject: 'lifecycle', secret });
});

afterAll(async () => {
  await sandbox.close();
  await redis.stop();
});

async function readyz(replica: Replica): Promise<{ status: number; body: { status?: string; redis?: string } }> {
  const res = await send(replica.adminUrl, '/readyz');
  return { status: res.status, body: res.json() as { status?: string; redis?: string } };
}

// Concurrent: each start waits out its own bound on the wait for Redis, neither waits for the other.
describe.concurrent('readiness', () => {
  /** A start against a port where no Redis answers, with `config`; the admin URL, port and process. */
  async function startWithoutRedis(config: string): Promise<{ admin: string; url: string; stop(): Promise<void> }> {
    const deadRedis = `redis://127.0.0.1:${String(await freePort())}`;
    const child = runNode('dist/main.js', {
      PORT: '0',
      ADMIN_PORT: '0',
      HOST: '127.0.0.1',
      LOG_LEVEL: 'info',
      UPSTREAM_URL: sandbox.url,
      JWT_SECRET: secret,
      REDIS_URL: deadRedis,
      CONFIG_FILE: replicaConfig(config),
    });
    const [, adminPort = ''] = await child.waitFor(/"adminPort":(\d+),"msg":"admin port listening; starting"/);
    const admin = `http://127.0.0.1:${adminPort}`;
    const starting = await send(admin, '/readyz');
    expect(starting.status).toBe(503);
    expect(starting.json()).toMatchObject({ status: 'starting' });
    expect((await send(admin, '/healthz')).status).toBe(200);
    // Nothing listens there: the start waits its bound (3 s) for Redis, then listens without it.
    const [, port = ''] = await child.waitFor(/"port":(\d+),"adminPort":\d+/);
    return {
      admin,
      url: `http://127.0.0.1:${port}`,
      async stop() {
        child.child.kill('SIGTERM');
        expect(await child.exited).toBe(0);
      },
    };
  }

  it('answers 503 starting while the start waits for Redis, then 503 unconfirmed: it knows no revocation yet', async () => {
    const started = await startWithoutRedis('{}\n');
    try {
      const ready = await send(started.admin, '/readyz');
      expect(ready.status).toBe(503);
      expect(ready.json()).toMatchObject({ status: 'unconfirmed', redis: 'down', upstream: 'ok' });
      const read = await getWithToken(started.url, `${API_PREFIX}/receipts?per_page=2`, reader);
      expect(read.status).toBe(503);
      expect(read.json()).toMatchObject({ code: 'operator_state_unavailable' });
      expect(read.headers['retry-after']).toBe('1');
    } finally {
      await started.stop();
    }
  });

  it('with both opt-outs, serves degraded without Redis: ready, reads fail open to the upstream', async () => {
    const started = await startWithoutRedis('control: { unconfirmed: serve }\nupstream: { budgetCutOff: share }\n');
    try {
      const ready = await send(started.admin, '/readyz');
      expect(ready.status).toBe(200);
      expect(ready.json()).toMatchObject({ status: 'ready', redis: 'down', upstream: 'ok', upstream_budget: 'local' });
      expect((await getWithToken(started.url, `${API_PREFIX}/receipts?per_page=2`, reader)).status).toBe(200);
    } finally {
      await started.stop();
    }
  });
});

describe('SIGTERM', () => {
  it('lets slow in-flight requests finish, answers /readyz 503 and refuses new connections meanwhile, then exits 0', async () => {
    const replica = await startReplica({
      UPSTREAM_URL: sandbox.url,
      REDIS_URL: redis.url,
      JWT_SECRET: secret,
      CONFIG_FILE: replicaConfig('{}\n'),
    });
    expect(await readyz(replica)).toMatchObject({ status: 200, body: { status: 'ready', redis: 'ok' } });
    sandbox.faults.set({ latencyMs: 1_200, resource: 'receipts' });
    const inFlightBefore = sandbox.stats().inFlight;
    const slow = [31, 32, 33].map((n) =>
      getWithToken(replica.url, `${API_PREFIX}/receipts?per_page=${String(n)}`, reader),
    );
    await until(() => sandbox.stats().inFlight >= inFlightBefore + 3, 'the slow requests to reach the upstream');

    replica.process.child.kill('SIGTERM');
    await until(async () => (await readyz(replica)).status === 503, '/readyz to answer 503');
    expect((await readyz(replica)).body.status).toBe('draining');
    // The API port no longer accepts connections.
    const refused = await send(replica.url, `${API_PREFIX}/receipts?per_page=2`, {
      headers: [['authorization', `Bearer ${reader}`]],
    }).then(
      () => 'answered',
      (error: unknown) =>
        typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'error',
    );
    expect(refused).toBe('ECONNREFUSED');

    const answers = await Promise.all(slow);
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200]);
    expect(await replica.process.exited).toBe(0);
    sandbox.faults.clear();
    expect(replica.process.stdout()).toContain('"msg":"stopped"');
  });

  it('with SHUTDOWN_DELAY_SECONDS, answers /readyz 503 at once while the client port still serves new connections, then drains and exits 0', async () => {
    const replica = await startReplica({
      UPSTREAM_URL: sandbox.url,
      REDIS_URL: redis.url,
      JWT_SECRET: secret,
      CONFIG_FILE: replicaConfig('{}\n'),
      SHUTDOWN_DELAY_SECONDS: '3',
    });
    replica.process.child.kill('SIGTERM');
    await replica.process.waitFor(/"msg":"readiness off; serving until the drain"/);
    expect(await readyz(replica)).toMatchObject({ status: 503, body: { status: 'draining' } });

    // A new connection, after readiness went off: still answered, and logged before the drain began.
    const served = await getWithToken(replica.url, `${API_PREFIX}/receipts?per_page=4`, reader);
    expect(served.status).toBe(200);
    await replica.process.waitFor(/"msg":"draining"/);
    const log = replica.process.stdout();
    const answeredAt = log.search(/"path":"\/api\/slab\/v1\/operations\/receipts"[^\n]*"status":200/);
    expect(answeredAt).toBeGreaterThan(log.indexOf('"msg":"readiness off; serving until the drain"'));
    expect(answeredAt).toBeLessThan(log.indexOf('"msg":"draining"'));

    // Then the drain: the client port stops accepting, and the process exits 0.
    const refused = await send(replica.url, `${API_PREFIX}/receipts?per_page=4`, {
      headers: [['authorization', `Bearer ${reader}`]],
    }).then(
      () => 'answered',
      (error: unknown) =>
        typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : 'error',
    );
    expect(refused).toBe('ECONNREFUSED');
    expect(await replica.process.exited).toBe(0);
  });

  it('closes a kept-alive connection once its request in flight is answered: the drain does not wait for the client', async () => {
    const proxy = await startProxy({ upstreamUrl: sandbox.url, keys: { kind: 'secret', secret } });
    sandbox.faults.set({ latencyMs: 300, resource: 'remnants' });
    const { port } = new URL(proxy.url);
    const socket = connect(Number(port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
    });
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    const inFlightBefore = sandbox.stats().inFlight;
    // A keep-alive request (HTTP/1.1's default): the client would keep the connection for more.
    socket.write(
      `GET ${API_PREFIX}/remnants?per_page=5 HTTP/1.1\r\nHost: proxy\r\nAuthorization: Bearer ${reader}\r\n\r\n`,
    );
    await until(() => sandbox.stats().inFlight > inFlightBefore, 'the request to reach the upstream');
    // A drain bound far past this test's timeout: only closing the connection ends the drain.
    await proxy.app.close({ drainMs: 600_000 });
    await closed;
    sandbox.faults.clear();
    expect([...received.matchAll(/^HTTP\/1\.1 (\d{3})/gm)].map((m) => Number(m[1]))).toEqual([200]);
  });
});

describe('draining in process', () => {
  it('answers a request whose headers were still arriving when the drain began with 503 shutting_down, and closes', async () => {
    const proxy = await startProxy({ upstreamUrl: sandbox.url, keys: { kind: 'secret', secret } });
    // The server's side of the connection: its first bytes mark a request begun, not an idle one.
    const serverSide = new Promise<Socket>((resolve) => proxy.app.server.once('connection', resolve));
    const socket = connect(Number(new URL(proxy.url).port), '127.0.0.1');
    let received = '';
    socket.on('data', (chunk: Buffer) => {
      received += chunk.toString('latin1');
    });
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    const server = await serverSide;
    const begun = once(server, 'data');
    socket.write(`GET ${API_PREFIX}/remnants?per_page=23 HTTP/1.1\r\nHost: proxy\r\n`);
    await begun;
    const closing = proxy.app.close({ drainMs: 600_000 });
    socket.write(`Authorization: Bearer ${reader}\r\n\r\n`);
    await closed;
    await closing;
    expect(received).toMatch(/^HTTP\/1\.1 503 /);
    expect(received).toContain('"code":"shutting_down"');
    expect(received.toLowerCase()).toContain('connection: close');
    expect(received.toLowerCase()).toContain('retry-after: 1');
  });
});

describe('SIGHUP', () => {
  it('applies a changed config file, and keeps the running settings when the new file is bad', async () => {
    const file = replicaConfig('cache:\n  resources:\n    warehouses: { ttl: 30 }\n');
    const replica = await startReplica({
      UPSTREAM_URL: sandbox.url,
      REDIS_URL: redis.url,
      JWT_SECRET: secret,
      CONFIG_FILE: file,
    });
    try {
      const target = `${API_PREFIX}/warehouses`;
      const first = await getWithToken(replica.url, target, reader);
      expect(first.headers['cache-control']).toBe('private, max-age=30, s-maxage=30');

      writeFileSync(file, 'cache:\n  resources:\n    warehouses: { ttl: 90 }\nrateLimit:\n  replicas: 3\n');
      replica.process.child.kill('SIGHUP');
      await replica.process.waitFor(/"msg":"config reloaded"/);
      expect(replica.process.stdout()).toMatch(/"needsRestart":\["rateLimit.replicas"\]/);
      // The page cached under the old ttl is fresh for the new one too (freshness is read at serve time).
      const reloaded = await getWithToken(replica.url, target, reader);
      expect(reloaded.headers['cache-control']).toBe('private, max-age=90, s-maxage=90');
      expect(reloaded.headers['cache-status']).toMatch(/^slab-proxy; hit;/);

      writeFileSync(file, 'cache:\n  resources:\n    warehouses: { ttl: "soon" }\n');
      replica.process.child.kill('SIGHUP');
      await replica.process.waitFor(/"msg":"config reload refused; the running settings stay"/);
      const kept = await getWithToken(replica.url, target, reader);
      expect(kept.headers['cache-control']).toBe('private, max-age=90, s-maxage=90');
      expect((await readyz(replica)).status).toBe(200);
    } finally {
      replica.process.child.kill('SIGTERM');
      expect(await replica.process.exited).toBe(0);
    }
  });
});
