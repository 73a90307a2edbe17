/**
 * How many replicas share the Redis, counted through it: a static `rateLimit.replicas` is wrong as
 * soon as an autoscaler adds or removes one. Each replica stamps itself in one sorted
 * set every `intervalMs` and counts the stamps younger than three intervals; a replica that stopped
 * drops out after that. The count is what each replica's local share is made of while Redis is
 * unusable (`points / replicas` of the inbound limits and of the upstream budget).
 *
 * The count given is the highest seen over the last `memoryMs`: a replica cut off from
 * Redis drops out of the others' count, and should Redis then fail for everyone, shares of the
 * smaller count would add up to more than the limits while the cut-off one runs its own share too.
 * A fleet that shrank keeps the smaller shares a while longer, which only costs capacity.
 *
 * A count is given once it is settled: taken at least one interval after this replica's first
 * stamp. Every replica stamps once an interval (and at once when its connection is ready), so a
 * settled count holds every replica that had reached Redis when this one first stamped; an earlier
 * one may lack replicas started beside it, and a share made of it would be too large
 * (docs/limits.md#the-upstream-budget). Until then `current()` is `undefined`, and the shares are
 * made of the configured `rateLimit.replicas`.
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from './connection.js';

export interface ReplicaCount {
  /**
   * The most replicas counted over the memory (this one included); `undefined` until the count is
   * settled (one interval after this replica's first stamp).
   */
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
  /** How long a count is remembered as the highest, ms (default 5 minutes). */
  readonly memoryMs?: number;
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
  const memoryMs = options.memoryMs ?? 300_000;
  const listeners: Array<(count: number) => void> = [];
  /** Counts within the memory, oldest first. */
  const seen: Array<{ readonly at: number; readonly count: number }> = [];
  let count: number | undefined;
  /** When this replica's first stamp was counted: its count is settled an interval later. */
  let firstStampAt: number | undefined;
  let settled = false;

  function remember(at: number, counted: number): void {
    seen.push({ at, count: counted });
    while (seen.length > 0 && (seen[0]?.at ?? at) <= at - memoryMs) seen.shift();
    const highest = seen.reduce((max, entry) => Math.max(max, entry.count), 0);
    firstStampAt ??= at;
    const settledNow = settled || at - firstStampAt >= intervalMs;
    if (highest === count && settledNow === settled) return;
    count = highest;
    settled = settledNow;
    if (settled) for (const listener of listeners) listener(highest);
  }

  async function stamp(): Promise<void> {
    if (client.status !== 'ready') return;
    try {
      const at = now();
      const counted = Number(await client.eval(STAMP_AND_COUNT, 1, key, id, at, at - 3 * intervalMs, 10 * intervalMs));
      if (counted >= 1) remember(at, counted);
    } catch (error) {
      options.onError?.(error); // the last count keeps applying
    }
  }

  // At once when connected, so that the replicas started beside this one count it within their
  // first interval; then once an interval.
  const onReady = (): void => void stamp();
  client.on('ready', onReady);
  void stamp();
  const timer = setInterval(() => void stamp(), intervalMs);
  timer.unref();
  return {
    current: () => (settled ? count : undefined),
    onChange: (listener) => void listeners.push(listener),
    async close() {
      clearInterval(timer);
      client.off('ready', onReady);
      if (client.status === 'ready') await client.zrem(key, id).catch((error: unknown) => options.onError?.(error));
    },
  };
}
