/**
 * A change Redis could not take stays pending and is written at the next check that reaches Redis
 * (src/control/operator-control.ts), and nothing stays pending that can no longer be written.
 * Against a real `redis-server`, with the replica's scripts failing on demand.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createOperatorControl, type OperatorControl } from '../../src/control/operator-control.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { until } from '../helpers/replicas.js';

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

async function connect(): Promise<Redis> {
  const client = new Redis(redis.url, { maxRetriesPerRequest: 0 });
  clients.push(client);
  await new Promise((resolve) => client.once('ready', resolve));
  return client;
}

/** The client, whose `EVAL`s are refused while `refuse` says so for their arguments. */
function refusing(client: Redis, refuse: (args: readonly unknown[]) => boolean): Redis {
  return new Proxy(client, {
    get(target, property) {
      const value: unknown = Reflect.get(target, property, target);
      if (property === 'eval' && typeof value === 'function')
        return (...args: unknown[]) =>
          refuse(args) ? Promise.reject(new Error('refused by the test')) : value.apply(target, args);
      return typeof value === 'function' ? value.bind(target) : value;
    },
  });
}

async function controlOn(
  prefix: string,
  client: Redis,
  options: { readonly now?: () => number; readonly pruneIntervalMs?: number } = {},
): Promise<OperatorControl> {
  const control = createOperatorControl({
    redis: { client, subscriber: await connect(), prefix },
    syncIntervalMs: 60_000, // checks only when the test asks
    settleMs: 0,
    ...options,
  });
  controls.push(control);
  await control.sync();
  return control;
}

describe('changes Redis could not take', () => {
  it('stay pending even when an earlier change of the same entry reached Redis meanwhile', async () => {
    const prefix = `changes-${randomUUID()}`;
    let refuseLifts = true;
    // The change script's arguments: script, 2, state key, meta key, field, value ('' to delete), ….
    const client = refusing(await connect(), (args) => refuseLifts && args[4] === 'sub:leaked' && args[5] === '');
    // A clock ahead of Redis's: the lift, stamped here, is later than the revocation Redis stamped.
    const control = await controlOn(prefix, client, { now: () => Date.now() + 60_000 });
    const other = await controlOn(prefix, await connect());

    const revoked = control.revoke('sub', 'leaked');
    const lifted = control.unrevoke('sub', 'leaked');
    expect(await revoked).toBe(true);
    expect(await lifted).toBe(false); // the operator hears that the other replicas do not have it yet

    refuseLifts = false;
    await control.sync(); // the next check that reaches Redis writes it
    await other.sync();
    expect(control.revocations()).toEqual([]);
    expect(other.revocations()).toEqual([]);
  });

  it('are no longer pending once they expired here: the checks stop writing and reading', async () => {
    const prefix = `changes-${randomUUID()}`;
    let clock = Date.now();
    let refuse = false;
    let stateScripts = 0;
    const client = refusing(await connect(), (args) => {
      if (args[1] === 2) stateScripts += 1; // the read, change and write-back scripts (not the prune)
      return refuse;
    });
    const control = await controlOn(prefix, client, { now: () => clock, pruneIntervalMs: 10 });

    refuse = true;
    expect(await control.revoke('jti', 'short-lived', Math.floor(clock / 1000) + 60)).toBe(false);
    clock += 120_000; // the token expired before Redis took the revocation
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(control.revocations()).toEqual([]);

    refuse = false;
    stateScripts = 0;
    await control.sync();
    await control.sync();
    expect(stateScripts).toBe(0);
  });
});

describe('a failover to a Redis that lagged behind the replicas', () => {
  const subjects = (control: OperatorControl): string[] =>
    control
      .revocations()
      .map((revocation) => revocation.id)
      .sort();

  it('loses no change, though Redis counts the same revs again for other changes', async () => {
    const prefix = `lag-${randomUUID()}`;
    const meta = `{${prefix}:ctl}:meta`;
    const state = `{${prefix}:ctl}:state`;
    const r1 = await controlOn(prefix, await connect());
    const r2 = await controlOn(prefix, await connect());
    for (const subject of ['a', 'b', 'c']) await r2.revoke('sub', subject);
    await until(() => subjects(r1).length === 3, 'the first replica to hear of the three revocations');
    // The promoted replica had not received the last change: one entry and one rev fewer.
    const admin = await connect();
    const rev = Number(await admin.hget(meta, 'rev'));
    await admin.hdel(state, 'sub:c');
    await admin.hset(meta, 'rev', String(rev - 1));
    // The next change takes the number the lost one had.
    await r2.revoke('sub', 'd');
    await until(
      () => subjects(r1).includes('d'),
      'the first replica to hear of the change counted with a rev it had passed',
    );
    await until(async () => (await admin.hexists(state, 'sub:c')) === 1, 'the lost change to be written back');
    expect(subjects(r1)).toEqual(['a', 'b', 'c', 'd']);
    expect(subjects(r2)).toEqual(['a', 'b', 'c', 'd']);
    // And a replica started now learns every decision from Redis.
    const r3 = await controlOn(prefix, await connect());
    expect(subjects(r3)).toEqual(['a', 'b', 'c', 'd']);
    expect(Number(await admin.hget(meta, 'rev'))).toBeGreaterThan(rev);
  });
});
