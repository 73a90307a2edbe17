/**
 * Company weights at run time (`/admin/upstream/weights`, docs/limits.md#fair-shares): set on one
 * replica, in force in every replica's upstream budget over the config's weights, kept by a replica
 * started afterwards, and back to the config's once deleted; bad input is a problem+json 400. Two
 * real proxies on a real `redis-server`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { send } from '../helpers/http.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { until } from '../helpers/replicas.js';
import { settledOperatorState } from '../helpers/shared-redis.js';

const ADMIN_TOKEN = 'company-weights-admin-token-of-some-length';
const CONFIG = { upstream: { companyWeights: { '5': 2, '7': 3 } } };

interface WeightsView {
  readonly config: Record<string, number>;
  readonly runtime: Record<string, number>;
  readonly effective: Record<string, number>;
}

let redis: RedisServer;
let sandbox: Sandbox;
const proxies: ProxyHandle[] = [];

async function replica(): Promise<ProxyHandle> {
  const proxy = await startProxy({
    upstreamUrl: sandbox.url,
    redisUrl: redis.url,
    adminToken: ADMIN_TOKEN,
    config: CONFIG,
  });
  proxies.push(proxy);
  return proxy;
}

function admin(proxy: ProxyHandle, method: string, target: string, body?: unknown): ReturnType<typeof send> {
  return send(proxy.adminUrl ?? '', target, {
    method,
    headers: [
      ['authorization', `Bearer ${ADMIN_TOKEN}`],
      ['content-type', 'application/json'],
    ],
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
}

async function weights(proxy: ProxyHandle): Promise<WeightsView> {
  const res = await admin(proxy, 'GET', '/admin/upstream/weights');
  expect(res.status).toBe(200);
  return res.json() as WeightsView;
}

beforeAll(async () => {
  redis = await startRedis();
  await settledOperatorState(redis);
  sandbox = await startSandbox();
});

afterAll(async () => {
  await Promise.all(proxies.map((proxy) => proxy.close()));
  await sandbox.close();
  await redis.stop();
});

describe('company weights at run time', () => {
  it("are in force on every replica's budget over the config's, kept by a replica started later, and deleted back to the config's", {
    timeout: 30_000,
  }, async () => {
    const [first, second] = [await replica(), await replica()];
    expect(await weights(second)).toEqual({ config: { '5': 2, '7': 3 }, runtime: {}, effective: { '5': 2, '7': 3 } });

    const set = await admin(first, 'PUT', '/admin/upstream/weights/7', { weight: 10 });
    expect(set.status).toBe(200);
    expect(set.json()).toEqual({ company_id: '7', weight: 10 });
    await admin(first, 'PUT', '/admin/upstream/weights/acme', { weight: 4 });
    await until(async () => (await weights(second)).effective.acme === 4, 'the weights to reach the other replica');
    expect(await weights(second)).toEqual({
      config: { '5': 2, '7': 3 },
      runtime: { '7': 10, acme: 4 },
      effective: { '5': 2, '7': 10, acme: 4 },
    });

    const later = await replica();
    expect((await weights(later)).effective).toEqual({ '5': 2, '7': 10, acme: 4 });

    const deleted = await admin(second, 'DELETE', '/admin/upstream/weights/7');
    expect(deleted.status).toBe(204);
    for (const proxy of [first, second, later])
      await until(async () => (await weights(proxy)).effective['7'] === 3, "the config's weight back");
    expect((await weights(first)).runtime).toEqual({ acme: 4 });
  });

  it.each([
    ['a weight of 0', '/admin/upstream/weights/1', { weight: 0 }, 'invalid_body', '#/weight'],
    ['a weight over 100', '/admin/upstream/weights/1', { weight: 101 }, 'invalid_body', '#/weight'],
    ['a fractional weight', '/admin/upstream/weights/1', { weight: 2.5 }, 'invalid_body', '#/weight'],
    ['no weight', '/admin/upstream/weights/1', {}, 'invalid_body', '#/weight'],
    ['an unknown member', '/admin/upstream/weights/1', { weight: 2, tier: 'gold' }, 'invalid_body', '#/tier'],
    ['a company id out of its grammar', '/admin/upstream/weights/a%20b', { weight: 2 }, 'invalid_parameter', undefined],
  ])('refuses %s: 400 with its code', async (_label, target, body, code, pointer) => {
    const proxy = proxies[0] ?? (await replica());
    const res = await admin(proxy, 'PUT', target, body);
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ code, ...(pointer !== undefined && { pointer }) });
  });

  it('is behind the operator token', async () => {
    const proxy = proxies[0] ?? (await replica());
    expect((await send(proxy.adminUrl ?? '', '/admin/upstream/weights')).status).toBe(401);
  });
});
