/**
 * The upstream budget's modes (src/upstream-guard/budget-mode.ts) against a real `redis-server`, with one
 * replica's connection through a TCP gate that can cut it off while the other still reaches Redis
 * (a partition). With `budgetCutOff: wait`: no slot at all while a cut-off replica's shared slots
 * may still be held, its share once they cannot, and back to the shared ledger through a rejoin
 * that registers what it holds and closes grants for every replica until both are heard in the
 * window (the quorum: src/upstream-guard/shared-ledger.ts), which opens it before its end; a request of the
 * other replica meanwhile waits, and is not refused. Then the ledger lost (FLUSHALL): a new epoch,
 * in which both replicas register their slots before grants open, again before the window's end.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createUpstreamBudget,
  HEARTBEAT_MS,
  HOLD_MARGIN_MS,
  REJOIN_MS,
  type UpstreamBudget,
} from '../../src/upstream-guard/upstream-budget.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { startTcpGate, type TcpGate } from '../helpers/tcp-gate.js';

const HOLD_MS = 1_000;
const COMMAND_TIMEOUT_MS = 250;
/** How long the cut-off replica waits before its share: src/upstream-guard/upstream-budget.ts. */
const FALLBACK_AFTER_MS = HOLD_MS + HOLD_MARGIN_MS + HEARTBEAT_MS + COMMAND_TIMEOUT_MS;

let redis: RedisServer;
let gate: TcpGate;
let inspector: Redis;
const clients: Redis[] = [];
const budgets: UpstreamBudget[] = [];

beforeAll(async () => {
  redis = await startRedis();
  gate = await startTcpGate(redis.port);
  inspector = new Redis(redis.url);
});

afterAll(async () => {
  for (const budget of budgets) budget.close();
  for (const client of clients) client.disconnect();
  inspector.disconnect();
  await gate.close();
  await redis.stop();
});

function budgetOn(url: string, prefix: string): UpstreamBudget {
  const client = new Redis(url, {
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    commandTimeout: COMMAND_TIMEOUT_MS,
    retryStrategy: () => 50,
  });
  client.on('error', () => undefined);
  clients.push(client);
  const budget = createUpstreamBudget({
    maxConcurrent: 4,
    maxPerSecond: 1_000,
    replicas: 2,
    holdMs: HOLD_MS,
    cutOff: 'wait',
    redis: { client, prefix, commandTimeoutMs: COMMAND_TIMEOUT_MS },
  });
  budgets.push(budget);
  return budget;
}

/** A job that holds its slot until `end()` is called. */
/** A job that runs until `end()`; `started` settles once its replica has run it (holds its slot). */
function heldJob(): { readonly job: () => Promise<string>; readonly started: Promise<void>; end(): void } {
  let end: () => void = () => undefined;
  let start: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => {
    end = resolve;
  });
  const started = new Promise<void>((resolve) => {
    start = resolve;
  });
  return {
    job: () => {
      start();
      return ended.then(() => 'done');
    },
    started,
    end,
  };
}

const ran = (value: unknown) => ({ kind: 'ran', value });

describe('the upstream budget when one replica is cut off from Redis', () => {
  const prefix = `modes-${randomUUID()}`;
  let cutOff: UpstreamBudget;
  let other: UpstreamBudget;
  const holdsKey = `{${prefix}:budget}:holds`;

  it('shares the ledger while both reach Redis', async () => {
    cutOff = budgetOn(gate.redisUrl, prefix);
    other = budgetOn(redis.url, prefix);
    expect(await cutOff.whenShared(REJOIN_MS + 5_000)).toBe(true);
    expect(await other.whenShared(REJOIN_MS + 5_000)).toBe(true);
  });

  /** When the gate was closed. */
  let cutAt = 0;

  it('takes no slot at all while its shared slots may still be held; the other keeps sharing', async () => {
    const early = heldJob();
    const earlyRun = cutOff.run(early.job, 1_000);
    // Cut once the replica holds the slot (its grant's answer came back), not once Redis has it.
    await early.started;
    expect(await inspector.zcard(holdsKey)).toBe(1);
    gate.cut();
    cutAt = Date.now();
    expect(await cutOff.whenMode('cut-off', 2_000)).toBe(true);
    expect(await cutOff.run(() => Promise.resolve('x'), 300)).toEqual({ kind: 'refused' });
    // Within its deadline (HOLD_MS) the job ends; its release cannot reach Redis, where the slot
    // stays counted until its hold runs out.
    early.end();
    expect(await earlyRun).toEqual(ran('done'));
    // The other replica: 3 more of 4, the cut-off one's slot still counted in Redis.
    const jobs = [heldJob(), heldJob(), heldJob()];
    const runs = jobs.map((held) => other.run(held.job, 1_000));
    await expect.poll(() => inspector.zcard(holdsKey)).toBe(4);
    expect(await other.run(() => Promise.resolve('y'), 100)).toEqual({ kind: 'refused' });
    for (const held of jobs) held.end();
    expect(await Promise.all(runs)).toEqual([ran('done'), ran('done'), ran('done')]);
  });

  const local = [heldJob(), heldJob()];
  let localRuns: Promise<unknown>[] = [];

  it('keeps to its share once every slot the ledger granted before must be over', async () => {
    expect(await cutOff.whenMode('local', FALLBACK_AFTER_MS + 2_000)).toBe(true);
    // Not before: its last answer came at most a heartbeat and a command before the cut.
    expect(Date.now() - cutAt).toBeGreaterThanOrEqual(FALLBACK_AFTER_MS - HEARTBEAT_MS - COMMAND_TIMEOUT_MS);
    // Its share is 4 / 2.
    localRuns = local.map((held) => cutOff.run(held.job, 1_000));
    expect(await cutOff.run(() => Promise.resolve('z'), 200)).toEqual({ kind: 'refused' });
  });

  it('rejoins: registers what it holds; grants open once both replicas are heard in the window, before its end', async () => {
    // One local slot ends while cut off: its release never reached Redis, which never had it.
    local[1]?.end();
    expect(await localRuns[1]).toEqual(ran('done'));
    const restoredAt = Date.now();
    gate.restore();
    expect(await cutOff.whenMode('rejoining', 2_000)).toBe(true);
    expect(await inspector.zcard(holdsKey)).toBe(1); // the local slot still held, registered
    // A request of the other replica in the window waits for the opening instead of being refused.
    const otherInWindow = heldJob();
    const otherRun = other.run(otherInWindow.job, REJOIN_MS);
    // A slot the rejoining one takes (from its share, or shared once open) is in Redis while used.
    const inWindow = heldJob();
    const inWindowRun = cutOff.run(inWindow.job, 1_000);
    await expect.poll(() => inspector.zcard(holdsKey)).toBe(3);
    expect(await cutOff.whenShared(REJOIN_MS + 2_000)).toBe(true);
    expect(await other.whenShared(REJOIN_MS + 2_000)).toBe(true);
    // Opened by the quorum (Redis's clock is this machine's): before the window would have ended.
    expect(Number(await inspector.hget(`{${prefix}:budget}:state`, 'open'))).toBeLessThan(restoredAt + REJOIN_MS);
    otherInWindow.end();
    expect(await otherRun).toEqual(ran('done'));
    // Shared again: 2 of 4 held by the rejoined replica.
    const more = [heldJob(), heldJob()];
    const runs = more.map((held) => other.run(held.job, 1_000));
    await expect.poll(() => inspector.zcard(holdsKey)).toBe(4);
    expect(await other.run(() => Promise.resolve('w'), 100)).toEqual({ kind: 'refused' });
    for (const held of [...more, inWindow, ...local]) held.end();
    expect(await Promise.all([...runs, inWindowRun, localRuns[0]])).toEqual([
      ran('done'),
      ran('done'),
      ran('done'),
      ran('done'),
    ]);
    await expect.poll(() => inspector.zcard(holdsKey)).toBe(0);
  });
});

describe('the upstream budget when Redis loses the ledger', () => {
  it('begins a new epoch in which every replica registers its slots before grants open', async () => {
    const prefix = `modes-${randomUUID()}`;
    const first = budgetOn(redis.url, prefix);
    const second = budgetOn(redis.url, prefix);
    expect(await first.whenShared(REJOIN_MS + 5_000)).toBe(true);
    expect(await second.whenShared(REJOIN_MS + 5_000)).toBe(true);
    const held = [heldJob(), heldJob()];
    const runs = [first.run(held[0]?.job ?? heldJob().job, 1_000), second.run(held[1]?.job ?? heldJob().job, 1_000)];
    const holdsKey = `{${prefix}:budget}:holds`;
    await expect.poll(() => inspector.zcard(holdsKey)).toBe(2);
    const flushedAt = Date.now();
    await inspector.flushall();
    // A request meanwhile waits for the opening (the window closes grants) rather than being refused.
    const inWindow = heldJob();
    const inWindowRun = first.run(inWindow.job, REJOIN_MS);
    // Both registered their slot again, and the request's slot came after them.
    await expect.poll(() => inspector.zcard(holdsKey), { timeout: REJOIN_MS }).toBe(3);
    expect(await first.whenShared(REJOIN_MS + 2_000)).toBe(true);
    expect(await second.whenShared(REJOIN_MS + 2_000)).toBe(true);
    // Opened once both had registered: before the window would have ended.
    expect(Number(await inspector.hget(`{${prefix}:budget}:state`, 'open'))).toBeLessThan(flushedAt + REJOIN_MS);
    for (const job of [...held, inWindow]) job.end();
    await Promise.all([...runs, inWindowRun]);
  });
});

describe('the upstream budget rejoining from its share', () => {
  it('takes no slot from its share while its rejoin is being registered: each one it takes then is registered first', async () => {
    const prefix = `modes-${randomUUID()}`;
    const holdsKey = `{${prefix}:budget}:holds`;
    const gated = await startTcpGate(redis.port);
    const client = new Redis(gated.redisUrl, {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      commandTimeout: COMMAND_TIMEOUT_MS,
      retryStrategy: () => 50,
    });
    client.on('error', () => undefined);
    clients.push(client);
    // The rejoin's registration (the script's call with `close` set) is held until released.
    let releaseRejoin: (() => void) | undefined;
    const rejoinHeld = new Promise<void>((resolve) => {
      releaseRejoin = resolve;
    });
    let rejoinSeen: (() => void) | undefined;
    const rejoinSent = new Promise<void>((resolve) => {
      rejoinSeen = resolve;
    });
    const held = new Proxy(client, {
      get(target, name, receiver) {
        if (name !== 'eval') return Reflect.get(target, name, receiver);
        return async (...args: Parameters<Redis['eval']>) => {
          // ARGV[3] (after the script, the key count and four keys) is `close`.
          if (args[8] === '1') {
            rejoinSeen?.();
            await rejoinHeld;
          }
          return target.eval(...args);
        };
      },
    });
    const budget = createUpstreamBudget({
      maxConcurrent: 4,
      maxPerSecond: 1_000,
      replicas: 2,
      holdMs: HOLD_MS,
      cutOff: 'share',
      redis: { client: held, prefix, commandTimeoutMs: COMMAND_TIMEOUT_MS },
    });
    budgets.push(budget);
    try {
      expect(await budget.whenShared(REJOIN_MS + 5_000)).toBe(true);
      gated.cut();
      expect(await budget.whenMode('local', 2_000)).toBe(true);
      const local = heldJob();
      const localRun = budget.run(local.job, 1_000);
      gated.restore();
      await rejoinSent;
      // Asked for while the rejoin is out: it waits, and when it runs, its slot is in the ledger
      // beside the local one the rejoin registered.
      let holdsWhenRun = -1;
      const later = budget.run(async () => {
        holdsWhenRun = await inspector.zcard(holdsKey);
        return 'later';
      }, 2_000);
      releaseRejoin?.();
      expect(await later).toEqual(ran('later'));
      expect(holdsWhenRun).toBe(2);
      local.end();
      expect(await localRun).toEqual(ran('done'));
    } finally {
      await gated.close();
    }
  });
});
