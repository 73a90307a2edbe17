/**
 * A replica's operator state is confirmed (src/control/operator-control.ts) only once it has read
 * a state settled in Redis: one whose incarnation is old enough that every replica that knew an
 * older state has written it back. Against a real `redis-server`: a fresh Redis waits the settle
 * time; a state there long before confirms at once; and after Redis lost everything, a replica
 * started meanwhile is confirmed only with what the others wrote back.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperatorControl, type OperatorControl } from '../../src/control/operator-control.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';

const SYNC_MS = 100;
const SETTLE_MS = 600;

let redis: RedisServer;
const clients: Redis[] = [];
const controls: OperatorControl[] = [];

beforeAll(async () => {
  redis = await startRedis();
});

afterAll(async () => {
  for (const control of controls) control.close();
  for (const client of clients) client.disconnect();
  await redis.stop();
});

function connect(): Redis {
  const client = new Redis(redis.url, { maxRetriesPerRequest: 0 });
  clients.push(client);
  return client;
}

async function controlOn(prefix: string): Promise<OperatorControl> {
  const client = connect();
  const subscriber = connect();
  await Promise.all([client, subscriber].map((c) => new Promise((resolve) => c.once('ready', resolve))));
  const control = createOperatorControl({
    redis: { client, subscriber, prefix },
    syncIntervalMs: SYNC_MS,
    settleMs: SETTLE_MS,
  });
  controls.push(control);
  return control;
}

describe('the operator state, confirmed', () => {
  it('without Redis: at once', async () => {
    const control = createOperatorControl();
    controls.push(control);
    expect(control.confirmed).toBe(true);
    await control.confirmation;
  });

  it('on a fresh Redis: once the state it wrote there has settled, not before', async () => {
    const control = await controlOn(`confirm-${randomUUID()}`);
    const startedAt = Date.now();
    await control.sync();
    expect(control.confirmed).toBe(false);
    expect(control.status().confirmed).toBe(false);
    await control.confirmation;
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(SETTLE_MS);
  });

  it('on a state written long before: at the first read', async () => {
    const prefix = `confirm-${randomUUID()}`;
    const admin = connect();
    await admin.hset(`{${prefix}:ctl}:meta`, 'incarnation', 'earlier', 'born', '1', 'rev', '0');
    const control = await controlOn(prefix);
    await control.sync();
    expect(control.confirmed).toBe(true);
  });

  it('after Redis lost everything, a replica started meanwhile is confirmed only with what the others knew', async () => {
    const prefix = `confirm-${randomUUID()}`;
    const knowing = await controlOn(prefix);
    await knowing.confirmation;
    expect(await knowing.revoke('sub', 'leaked')).toBe(true);
    await connect().flushall();
    const started = await controlOn(prefix);
    await started.sync(); // it may be the one that writes the new, empty incarnation
    await started.confirmation;
    expect(started.revocations()).toEqual([{ kind: 'sub', id: 'leaked' }]);
  });
});
