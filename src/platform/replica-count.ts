/**
 * How many replicas share the Redis, counted through it (issue 12: a static `rateLimit.replicas`
 * is wrong as soon as an autoscaler adds or removes one). Each replica stamps itself in one sorted
 * set every `intervalMs` and counts the stamps younger than three intervals; a replica that stopped
 * drops out after that. The count is what each replica's local share is made of while Redis is
 * unusable (`points / replicas` of the inbound limits and of the upstream budget): the last count
 * seen before Redis went away is exactly the one wanted then.
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from './redis.js';

export interface ReplicaCount {
  /** The replicas counted last (this one included); `undefined` until Redis has been asked once. */
  current(): number | undefined;
  onChange(listener: (count: number) => void): void;
  /** Stops stamping, and takes this replica out of the count at once. */
  close(): Promise<void>;
}

export interface ReplicaCountOptions {
  readonly client: RedisClient;
  readonly prefix: string;
  /** How often each replica stamps itself and counts, ms (default 2 000). */
  readonly intervalMs?: number;
  readonly now?: () => number;
  readonly onError?: (error: unknown) => void;
}

/** Stamp, forget the stale, count: one atomic step. KEYS: the set. ARGV: id, now, stale before. */
const STAMP_AND_COUNT = `redis.call('zadd', KEYS[1], ARGV[2], ARGV[1])
redis.call('zremrangebyscore', KEYS[1], '-inf', '(' .. ARGV[3])
redis.call('pexpire', KEYS[1], ARGV[4])
return redis.call('zcard', KEYS[1])`;

export function countReplicas(options: ReplicaCountOptions): ReplicaCount {
  const { client } = options;
  const now = options.now ?? Date.now;
  const intervalMs = options.intervalMs ?? 2_000;
  const key = `${options.prefix}:replicas`;
  const id = randomUUID();
  const listeners: Array<(count: number) => void> = [];
  let count: number | undefined;

  async function stamp(): Promise<void> {
    if (client.status !== 'ready') return;
    try {
      const at = now();
      const counted = Number(await client.eval(STAMP_AND_COUNT, 1, key, id, at, at - 3 * intervalMs, 10 * intervalMs));
      if (counted >= 1 && counted !== count) {
        count = counted;
        for (const listener of listeners) listener(counted);
      }
    } catch (error) {
      options.onError?.(error); // the last count keeps applying
    }
  }

  void stamp();
  const timer = setInterval(() => void stamp(), intervalMs);
  timer.unref();
  return {
    current: () => count,
    onChange: (listener) => void listeners.push(listener),
    async close() {
      clearInterval(timer);
      if (client.status === 'ready') await client.zrem(key, id).catch((error: unknown) => options.onError?.(error));
    },
  };
}
