/**
 * The replicas counted through Redis (src/platform/redis/replica-count.ts), against a real
 * `redis-server`: each counts every replica stamping, and keeps the highest count of its memory, so
 * that a replica dropping out (stopped, or cut off from Redis) lowers the shares only once the
 * memory has passed.
 */
import { randomUUID } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { countReplicas, type ReplicaCount } from '../../src/platform/redis/replica-count.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';

const INTERVAL_MS = 50;

let redis: RedisServer;
let client: Redis;
const counts: ReplicaCount[] = [];

beforeAll(async () => {
  redis = await startRedis();
  client = new Redis(redis.url);
  await new Promise((resolve) => client.once('ready', resolve));
});

afterAll(async () => {
  await Promise.all(counts.map((count) => count.close()));
  client.disconnect();
  await redis.stop();
});

function counter(prefix: string, memoryMs: number, now?: () => number): ReplicaCount {
  const count = countReplicas({ client, prefix, intervalMs: INTERVAL_MS, memoryMs, ...(now !== undefined && { now }) });
  counts.push(count);
  return count;
}

function reaches(count: ReplicaCount, value: number): Promise<void> {
  return new Promise((resolve) => {
    if (count.current() === value) return resolve();
    count.onChange((now) => {
      if (now === value) resolve();
    });
  });
}

describe('the replica count', () => {
  it('counts every replica, and keeps the highest count for its memory after one stops', async () => {
    const prefix = `count-${randomUUID()}`;
    const MEMORY_MS = 2_000;
    const one = counter(prefix, MEMORY_MS);
    const two = counter(prefix, MEMORY_MS);
    await Promise.all([reaches(one, 2), reaches(two, 2)]);
    const stoppedAt = Date.now();
    await two.close();
    // Its stamp is gone at once (close removes it), but the count remembered stays 2 ...
    expect(await client.zcard(`${prefix}:replicas`)).toBe(1);
    expect(one.current()).toBe(2);
    // ... until the memory has passed since the last count of 2, at most one interval before the stop.
    await reaches(one, 1);
    expect(Date.now() - stoppedAt).toBeGreaterThanOrEqual(MEMORY_MS - INTERVAL_MS);
  });

  it('gives no count before one interval has passed since its first stamp, however many it made', async () => {
    const prefix = `count-${randomUUID()}`;
    let clock = 1_000_000;
    const stamps = vi.spyOn(client, 'eval');
    const one = counter(prefix, 60_000, () => clock);
    const two = counter(prefix, 60_000, () => clock);
    // Both stamped, again and again, with no time passing on their clock: each saw two replicas,
    // and neither says so — a count taken so early may lack replicas started beside it.
    const key = `${prefix}:replicas`;
    await vi.waitFor(() =>
      expect(stamps.mock.calls.filter((call) => call[2] === key).length).toBeGreaterThanOrEqual(6),
    );
    expect(await client.zcard(key)).toBe(2);
    expect(one.current()).toBeUndefined();
    expect(two.current()).toBeUndefined();
    stamps.mockRestore();
    clock += INTERVAL_MS;
    await Promise.all([reaches(one, 2), reaches(two, 2)]);
  });
});
