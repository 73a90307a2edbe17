/** The two lines of requests waiting for an upstream slot: requests first, prefetches after (issue 19). */
import { describe, expect, it } from 'vitest';
import { type Slot, SlotWaiters } from '../../src/limits/slot-waiters.js';

const slot = (id: string, startAt: number): Slot => ({ id, startAt, startBy: startAt + 50 });

describe('SlotWaiters', () => {
  it('serves the requests first, in order, and a prefetch only once no request waits', async () => {
    const waiters = new SlotWaiters(() => 1_000);
    const prefetch = waiters.waitSpare(1_000);
    const first = waiters.wait(1_000);
    const second = waiters.wait(1_000);
    expect(waiters.size).toBe(3);
    expect(waiters.requests).toBe(2);
    expect(waiters.hand(slot('a', 1_000))).toBe(true);
    expect(waiters.hand(slot('b', 1_000))).toBe(true);
    expect(waiters.hand(slot('c', 1_000))).toBe(true);
    expect((await first)?.id).toBe('a');
    expect((await second)?.id).toBe('b');
    expect((await prefetch)?.id).toBe('c');
    expect(waiters.hand(slot('d', 1_000))).toBe(false);
  });

  it('gives a prefetch only a slot that can start now: offered a later one, it gives up and the slot is not taken', async () => {
    const waiters = new SlotWaiters(() => 1_000);
    const prefetch = waiters.waitSpare(1_000);
    expect(waiters.hand(slot('later', 1_001))).toBe(false);
    expect(await prefetch).toBeUndefined();
    expect(waiters.size).toBe(0);
  });

  it('refuses every waiter of both lines when closed', async () => {
    const waiters = new SlotWaiters();
    const request = waiters.wait(1_000);
    const prefetch = waiters.waitSpare(1_000);
    waiters.refuseAll();
    expect(await request).toBeUndefined();
    expect(await prefetch).toBeUndefined();
    expect(waiters.size).toBe(0);
  });
});
