/**
 * One contract for both of the upstream budget's ledgers (src/upstream-guard/slot-ledger.ts in process,
 * src/upstream-guard/shared-ledger.ts in a real `redis-server`): the same asks get the same answers. Then
 * what only the shared one does: epochs, begun when the ledger is missing or was written by another
 * Redis process, and grants closed while the replicas register what they hold.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type RegisterCaller, SharedLedger } from '../../src/upstream-guard/shared-ledger.js';
import {
  type BudgetLimits,
  type GrantResult,
  RATE_WINDOW_MS,
  RESERVE_AHEAD_MS,
  SlotLedger,
  spacingMs,
} from '../../src/upstream-guard/slot-ledger.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';

const HOLD_MS = 300;
const REJOIN_MS = 150;

interface LedgerUnderTest {
  grant(ids: readonly string[], limits: BudgetLimits): Promise<GrantResult>;
  release(id: string): Promise<void>;
  /** Registers a slot held elsewhere, its start due `ageMs` ago. */
  record(id: string, ageMs: number): Promise<void>;
}

let redis: RedisServer;
let client: Redis;

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
});

afterAll(async () => {
  client.disconnect();
  await redis.stop();
});

/**
 * A caller new to the fleet (never registered in an epoch): no part of the quorum that opens grants
 * early, so every window here runs its whole length unless a test says otherwise.
 */
const BEAT: RegisterCaller = { id: 'contract', role: 'beat', epoch: undefined, expectedReplicas: 1 };
const REGISTERS: RegisterCaller = { ...BEAT, role: 'register' };

const wait = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

function inProcess(): LedgerUnderTest {
  const ledger = new SlotLedger(HOLD_MS);
  return {
    grant: (ids, limits) => Promise.resolve(ledger.grant(Date.now(), ids, limits)),
    release: (id) => Promise.resolve(ledger.release(id)),
    record: (id, ageMs) => Promise.resolve(ledger.record(id, Date.now() - ageMs, Date.now())),
  };
}

function sharedLedger(prefix = `contract-${randomUUID()}`): SharedLedger {
  return new SharedLedger({ client, prefix, holdMs: HOLD_MS, rejoinMs: REJOIN_MS, newEpoch: () => randomUUID() });
}

/** The shared ledger as a replica uses it: registered in the epoch, asking once grants are open. */
async function inRedis(): Promise<LedgerUnderTest> {
  const ledger = sharedLedger();
  const begun = await ledger.register([], false, BEAT);
  let epoch = begun.epoch;
  await wait(begun.openInMs + 1); // the new epoch's window: an open ledger is what is under test
  return {
    async grant(ids, limits) {
      for (;;) {
        const attempt = await ledger.acquire(epoch, ids, limits);
        if (attempt.kind === 'granted' || attempt.kind === 'full') {
          return attempt.kind === 'granted'
            ? { kind: 'granted', startsInMs: attempt.startsInMs }
            : { kind: 'full', retryInMs: attempt.retryInMs };
        }
        if (attempt.kind === 'epoch') epoch = (await ledger.register([], false, BEAT)).epoch;
        else await wait(Math.max(1, attempt.openInMs));
      }
    },
    release: (id) => ledger.release([id]),
    async record(id, ageMs) {
      await ledger.register([{ id, ageMs }], false, REGISTERS);
    },
  };
}

describe.each([
  ['in process', () => Promise.resolve(inProcess())],
  ['in Redis', inRedis],
] as const)('the slot ledger %s', (_name, make) => {
  it('grants up to maxConcurrent, each start a spacing after the last; a release frees one', async () => {
    const ledger = await make();
    const limits = { maxConcurrent: 3, maxPerSecond: 1_000 };
    const granted = await ledger.grant(['a', 'b', 'c', 'd', 'e'], limits);
    expect(granted).toEqual({ kind: 'granted', startsInMs: [0, 1.1, 2.2] });
    expect(await ledger.grant(['d'], limits)).toEqual({ kind: 'full', retryInMs: undefined });
    await ledger.release('b');
    expect((await ledger.grant(['d'], limits)).kind).toBe('granted');
  });

  it('grants no start further ahead than it may, and says when the next one is due', async () => {
    const ledger = await make();
    const limits = { maxConcurrent: 100, maxPerSecond: 100 };
    const spacing = spacingMs(limits);
    const granted = await ledger.grant(
      Array.from({ length: 10 }, (_, i) => `s${String(i)}`),
      limits,
    );
    const count = Math.floor(RESERVE_AHEAD_MS / spacing) + 1;
    expect(granted).toEqual({
      kind: 'granted',
      startsInMs: Array.from({ length: count }, (_, i) => Math.round(i * spacing * 1000) / 1000),
    });
    const next = await ledger.grant(['t'], limits);
    expect(next.kind).toBe('full');
    // Due one spacing after the last granted start, less what may be granted ahead (time passed).
    if (next.kind === 'full') {
      expect(next.retryInMs).toBeGreaterThanOrEqual(1);
      expect(next.retryInMs).toBeLessThanOrEqual(Math.ceil(count * spacing - RESERVE_AHEAD_MS));
    }
  });

  it('counts registered slots and their starts: the window full until the oldest leaves it', async () => {
    const ledger = await make();
    const limits = { maxConcurrent: 100, maxPerSecond: 3 };
    const recordedFrom = Date.now();
    for (const id of ['r1', 'r2', 'r3']) await ledger.record(id, 0);
    const full = await ledger.grant(['x'], limits);
    const elapsed = Date.now() - recordedFrom;
    expect(full.kind).toBe('full');
    // The oldest start leaves the window a window after it was registered (ms rounding: 1).
    if (full.kind === 'full') {
      expect(full.retryInMs).toBeGreaterThanOrEqual(RATE_WINDOW_MS - elapsed - 1);
      expect(full.retryInMs).toBeLessThanOrEqual(RATE_WINDOW_MS);
    }
    const concurrency = await make();
    for (const id of ['h1', 'h2']) await concurrency.record(id, 0);
    expect(await concurrency.grant(['y'], { maxConcurrent: 2, maxPerSecond: 1_000 })).toEqual({
      kind: 'full',
      retryInMs: undefined,
    });
  });

  it('forgets a slot that was never released once its hold is over', async () => {
    const ledger = await make();
    const limits = { maxConcurrent: 1, maxPerSecond: 1_000 };
    expect((await ledger.grant(['lost'], limits)).kind).toBe('granted');
    expect((await ledger.grant(['next'], limits)).kind).toBe('full');
    await wait(HOLD_MS + 20); // the hold's own length: that is what passes
    expect((await ledger.grant(['next'], limits)).kind).toBe('granted');
  });
});

describe("the shared ledger's epochs", () => {
  const limits = { maxConcurrent: 5, maxPerSecond: 1_000 };

  it('begins one where there is none, closed for the rejoin window, then grants', async () => {
    const ledger = sharedLedger();
    expect((await ledger.acquire(undefined, ['a'], limits)).kind).toBe('epoch');
    const { epoch, openInMs } = await ledger.register([], false, BEAT);
    expect(openInMs).toBeGreaterThan(0);
    expect(openInMs).toBeLessThanOrEqual(REJOIN_MS);
    const closed = await ledger.acquire(epoch, ['a'], limits);
    expect(closed.kind).toBe('closed');
    await wait(closed.openInMs + 1);
    expect((await ledger.acquire(epoch, ['a'], limits)).kind).toBe('granted');
  });

  it('begins a new one when another Redis process wrote the state (a failover), keeping the slots', async () => {
    const prefix = `contract-${randomUUID()}`;
    const ledger = sharedLedger(prefix);
    const first = (await ledger.register([{ id: 'held', ageMs: 0 }], false, REGISTERS)).epoch;
    // What a promoted replica holds: the state as the old master wrote it, its run id in `node`.
    await client.hset(`{${prefix}:budget}:state`, 'node', 'the-old-master');
    const after = await ledger.acquire(first, ['a'], limits);
    expect(after.kind).toBe('epoch');
    expect(after.epoch).not.toBe(first);
    expect(after.openInMs).toBeGreaterThan(0);
    expect(await client.zscore(`{${prefix}:budget}:holds`, 'held')).not.toBeNull();
  });

  it('begins a new one when the state is gone (flushed, restarted empty)', async () => {
    const prefix = `contract-${randomUUID()}`;
    const ledger = sharedLedger(prefix);
    const first = (await ledger.register([], false, BEAT)).epoch;
    await client.del(`{${prefix}:budget}:state`);
    const view = await ledger.register([{ id: 'mine', ageMs: 10 }], false, REGISTERS);
    expect(view.epoch).not.toBe(first);
    expect(await client.zscore(`{${prefix}:budget}:holds`, 'mine')).not.toBeNull();
  });

  it('closes grants for the rejoin window when a replica rejoins from its local share', async () => {
    const ledger = sharedLedger();
    const { epoch, openInMs } = await ledger.register([], false, BEAT);
    await wait(openInMs + 1);
    expect((await ledger.acquire(epoch, ['a'], limits)).kind).toBe('granted');
    const rejoined = await ledger.register([{ id: 'local-1', ageMs: 50 }], true, REGISTERS);
    expect(rejoined.epoch).toBe(epoch);
    expect(rejoined.openInMs).toBeGreaterThan(REJOIN_MS - 50);
    expect((await ledger.acquire(epoch, ['b'], limits)).kind).toBe('closed');
  });

  describe('the quorum that opens grants before the window ends', () => {
    /** Two replicas of a fleet of two, each registered in the ledger's first epoch. */
    async function fleetOfTwo(): Promise<{ ledger: SharedLedger; prefix: string; epoch: string }> {
      const prefix = `contract-${randomUUID()}`;
      const ledger = sharedLedger(prefix);
      const { epoch, openInMs } = await ledger.register([], false, { ...REGISTERS, id: 'a' });
      await ledger.register([], false, { ...REGISTERS, id: 'b' });
      await wait(openInMs + 1);
      expect((await ledger.acquire(epoch, ['x'], limits)).kind).toBe('granted');
      return { ledger, prefix, epoch };
    }
    const replica = (id: string, epoch: string, registers: boolean): RegisterCaller => ({
      id,
      role: registers ? 'register' : 'beat',
      epoch,
      expectedReplicas: 2,
    });

    it('a lost ledger opens once every replica it expects has registered its slots, not before', async () => {
      const { ledger, prefix, epoch } = await fleetOfTwo();
      await client.del(`{${prefix}:budget}:state`);
      const first = await ledger.register([{ id: 'a-1', ageMs: 5 }], false, replica('a', epoch, true));
      expect(first.epoch).not.toBe(epoch);
      expect(first.openInMs).toBeGreaterThan(REJOIN_MS - 100);
      // The other's heartbeat names the old epoch: it has not registered in this one yet.
      const beat = await ledger.register([], false, replica('b', epoch, false));
      expect(beat.openInMs).toBeGreaterThan(0);
      expect((await ledger.acquire(first.epoch, ['y'], limits)).kind).toBe('closed');
      const second = await ledger.register([{ id: 'b-1', ageMs: 5 }], false, replica('b', epoch, true));
      expect(second.openInMs).toBeLessThanOrEqual(0);
      expect((await ledger.acquire(first.epoch, ['y'], limits)).kind).toBe('granted');
      // The slot granted before, the two registered, the one granted now.
      expect(await client.zcard(`{${prefix}:budget}:holds`)).toBe(4);
    });

    it('counts no replica new to the fleet towards the quorum, though it registers its slots', async () => {
      const { ledger, prefix, epoch } = await fleetOfTwo();
      await client.del(`{${prefix}:budget}:state`);
      const first = await ledger.register([], false, replica('a', epoch, true));
      const newcomer = await ledger.register([{ id: 'c-1', ageMs: 0 }], false, {
        id: 'c',
        role: 'register',
        epoch: undefined,
        expectedReplicas: 1,
      });
      expect(newcomer.openInMs).toBeGreaterThan(0);
      expect((await ledger.acquire(first.epoch, ['y'], limits)).kind).toBe('closed');
      expect(await client.zscore(`{${prefix}:budget}:holds`, 'c-1')).not.toBeNull();
    });

    it('expects the most replicas any of them has counted', async () => {
      const { ledger, prefix, epoch } = await fleetOfTwo();
      await client.del(`{${prefix}:budget}:state`);
      const first = await ledger.register([], false, { ...replica('a', epoch, true), expectedReplicas: 3 });
      const second = await ledger.register([], false, replica('b', epoch, true));
      expect(second.openInMs).toBeGreaterThan(0);
      expect((await ledger.acquire(first.epoch, ['y'], limits)).kind).toBe('closed');
    });

    it('a rejoin window opens once the replicas that were sharing beat in it', async () => {
      const { ledger, epoch } = await fleetOfTwo();
      const rejoined = await ledger.register([{ id: 'a-local', ageMs: 20 }], true, replica('a', epoch, true));
      expect(rejoined.openInMs).toBeGreaterThan(REJOIN_MS - 100);
      const beat = await ledger.register([], false, replica('b', epoch, false));
      expect(beat.openInMs).toBeLessThanOrEqual(0);
      expect((await ledger.acquire(epoch, ['y'], limits)).kind).toBe('granted');
    });

    it('never counts a probe: a replica on its share is present once it has registered its slots', async () => {
      const { ledger, epoch } = await fleetOfTwo();
      const rejoined = await ledger.register([], true, replica('a', epoch, true));
      expect(rejoined.openInMs).toBeGreaterThan(0);
      const probe = await ledger.register([], false, { ...replica('b', epoch, false), role: 'probe' });
      expect(probe.openInMs).toBeGreaterThan(0);
      expect((await ledger.acquire(epoch, ['y'], limits)).kind).toBe('closed');
      const registered = await ledger.register([{ id: 'b-local', ageMs: 30 }], true, replica('b', epoch, true));
      expect(registered.openInMs).toBeLessThanOrEqual(0);
    });

    it('registers a slot taken from a share only while grants are closed: once open, the rule decides', async () => {
      const { ledger, prefix, epoch } = await fleetOfTwo();
      const holdsKey = `{${prefix}:budget}:holds`;
      await ledger.register([], true, replica('a', epoch, true));
      const share = { ...replica('a', epoch, true), role: 'share' } as const;
      const closed = await ledger.register([{ id: 'a-share-1', ageMs: 0 }], false, share);
      expect(closed.registered).toBe(true);
      expect(await client.zscore(holdsKey, 'a-share-1')).not.toBeNull();
      await ledger.register([], false, replica('b', epoch, false)); // the quorum: open
      const open = await ledger.register([{ id: 'a-share-2', ageMs: 0 }], false, share);
      expect(open.registered).toBe(false);
      expect(open.openInMs).toBeLessThanOrEqual(0);
      expect(await client.zscore(holdsKey, 'a-share-2')).toBeNull();
    });

    it('a window begun anew forgets who was present in the last one', async () => {
      const { ledger, epoch } = await fleetOfTwo();
      const rejoined = await ledger.register([], true, replica('a', epoch, true));
      await ledger.register([], false, replica('b', epoch, false));
      await wait(1);
      // Grants opened; a later rejoin begins a new window, in which only its caller is present.
      const again = await ledger.register([], true, replica('b', epoch, true));
      expect(rejoined.epoch).toBe(epoch);
      expect(again.openInMs).toBeGreaterThan(REJOIN_MS - 100);
      expect((await ledger.acquire(epoch, ['y'], limits)).kind).toBe('closed');
    });
  });
});
