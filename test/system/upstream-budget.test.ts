/**
 * The upstream budget across replicas: a burst of 500 cold requests over two proxy processes
 * never has more requests in flight at the sandbox, nor more started in any second, than the
 * guard allows for all replicas together; what cannot get a slot in time is a 503 with
 * Retry-After, never a queue without end. A flushed Redis does not stop it: the ledger begins a
 * new epoch, in which the replicas register what they hold, and grants again.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { getWithToken, type RawResponse } from '../helpers/http.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { type Replica, startReplicas } from '../helpers/replicas.js';
import { startSandbox } from '../helpers/sandbox.js';

const secret = 'upstream budget across replicas: thirty-two bytes at least';
const MAX_CONCURRENT = 4;
const MAX_PER_SECOND = 20;

let redis: RedisServer;
let sandbox: Sandbox;
const replicas: Replica[] = [];

/** 500 different pages: every one a cold key, so every one needs the upstream. */
function coldTargets(count: number): string[] {
  const targets: string[] = [];
  for (let i = 0; targets.length < count; i++) {
    const resource = RESOURCE_NAMES[i % RESOURCE_NAMES.length] ?? 'receipts';
    targets.push(`${API_PREFIX}/${resource}?after_id=${String(i)}&per_page=${String((i % 100) + 1)}`);
  }
  return targets;
}

beforeAll(async () => {
  redis = await startRedis();
  sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
  const env = { UPSTREAM_URL: sandbox.url, REDIS_URL: redis.url, JWT_SECRET: secret };
  replicas.push(
    ...(await startReplicas(
      2,
      env,
      `upstream:\n  maxConcurrent: ${MAX_CONCURRENT}\n  maxPerSecond: ${MAX_PER_SECOND}\n  maxQueueWait: 1\nrateLimit:\n  perCredential: { points: 100000, duration: 60 }\n  perCompany: { points: 100000, duration: 60 }\n  replicas: 2\n`,
    )),
  );
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
  await sandbox.close();
  await redis.stop();
});

describe('the upstream budget under a burst over two replicas', () => {
  it('never exceeds the concurrency or the rate at the upstream; the rest is 503 with Retry-After', async () => {
    const [one, two] = replicas as [Replica, Replica];
    const bearer = await mintDevToken({ company: 1, secret });
    sandbox.resetStats();
    sandbox.faults.set({ latencyMs: 40 });
    const answers: RawResponse[] = await Promise.all(
      coldTargets(500).map((target, i) => getWithToken(i % 2 === 0 ? one.url : two.url, target, bearer)),
    );
    sandbox.faults.clear();
    const stats = sandbox.stats();
    expect(stats.maxInFlight).toBeLessThanOrEqual(MAX_CONCURRENT);
    expect(stats.maxPerSecond).toBeLessThanOrEqual(MAX_PER_SECOND);
    const ok = answers.filter((a) => a.status === 200);
    const refused = answers.filter((a) => a.status === 503);
    expect(ok.length).toBeGreaterThan(0);
    expect(ok.length + refused.length).toBe(500);
    for (const answer of refused) {
      expect((answer.json() as { code: string }).code).toBe('upstream_unavailable');
      expect(answer.headers['retry-after']).toBe('1');
    }
    expect(stats.served).toBe(ok.length);
  });

  it('keeps working after Redis loses the ledger (FLUSHALL): a new epoch, then slots again', async () => {
    const [one] = replicas as [Replica, Replica];
    const admin = new Redis(redis.url);
    await admin.flushall();
    admin.disconnect();
    const bearer = await mintDevToken({ company: 2, secret });
    const statuses = [];
    for (const target of coldTargets(30).slice(10)) statuses.push((await getWithToken(one.url, target, bearer)).status);
    expect(statuses.every((s) => s === 200 || s === 503)).toBe(true);
    expect(statuses.filter((s) => s === 200).length).toBeGreaterThanOrEqual(10);
  });
});
