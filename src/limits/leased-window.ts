/**
 * Leased points (docs/limits.md#inbound-limits): one inbound policy's count, shared by every replica
 * through Redis (rate-limiter-flexible: one key per client, atomic), spent here from leases. A
 * replica reserves a batch of a key's points in one atomic Redis call and spends them here,
 * synchronously: the hit path pays no round trip for most decisions (a Redis call per decision
 * costs more CPU than a whole cache hit: docs/architecture.md#why-the-hit-path-is-built-as-it-is).
 * The total can never pass `points`, since
 * every reservation is counted in Redis; what a replica reserved and did not spend is lost to the
 * others for the rest of the window.
 */
import { RateLimiterRedis, RateLimiterRes } from 'rate-limiter-flexible';
import type { RedisClient } from '../platform/redis/connection.js';
import type { RedisHealth } from '../platform/redis/health.js';
import type { PolicyCount, PolicyName, RatePolicy } from './limit-verdict.js';

/** The first batch a replica reserves of a key's points (never more than the largest, below). */
const FIRST_BATCH = 100;
/** How long a batch should last at the key's demand: far longer than a Redis round trip under load. */
const LEASE_TARGET_MS = 100;

/**
 * The largest batch: a sixteenth of the replica's share of the allowance. A replica holds at most
 * two batches of a key (the rest of one, and the next, reserved ahead), so what idle replicas
 * strand stays under an eighth of the allowance.
 */
export function largestBatch(points: number, replicas: number): number {
  return Math.max(1, Math.floor(points / (replicas * 16)));
}

/** The first batch of a key. */
export function firstBatch(largest: number): number {
  return Math.min(FIRST_BATCH, largest);
}

/**
 * The next batch of a key, from how long its last one lasted (none yet: the first). Within the
 * largest, a batch follows the key's demand: it starts at 100 points and doubles while
 * each batch lasts less than `LEASE_TARGET_MS`, halving again when one lasts four times as long: a
 * fixed batch could be spent by one event-loop turn of concurrent hits before its refill came back,
 * and the hits after it then waited for Redis (docs/architecture.md#why-the-hit-path-is-built-as-it-is).
 */
export function nextBatch(
  previous: { readonly batch: number; readonly reservedAt: number } | undefined,
  at: number,
  largest: number,
): number {
  const first = firstBatch(largest);
  if (previous === undefined) return first;
  const lasted = at - previous.reservedAt;
  const size =
    lasted < LEASE_TARGET_MS
      ? previous.batch * 2
      : lasted > 4 * LEASE_TARGET_MS
        ? Math.floor(previous.batch / 2)
        : previous.batch;
  return Math.max(first, Math.min(size, largest));
}

/** The points of a key this replica holds: what is left of its reservations in the current window. */
interface Lease {
  left: number;
  /** A background reservation starts when this many points or fewer are left. */
  readonly refillBelow: number;
  readonly resetAt: number;
  /** The key's count in Redis after this reservation (ours included). */
  readonly reservedTotal: number;
  /** The size of the batch this lease was reserved with, and when it arrived. */
  readonly batch: number;
  readonly reservedAt: number;
}

/** Leases held at most: forgetting one costs only a reservation. */
const MAX_LEASES = 100_000;
/** Rounds of reservation a waiting decision makes at most before deciding on the local share. */
const MAX_ROUNDS = 8;

/** Where a policy's points are counted: rate-limiter-flexible's limiter, one atomic Redis call per reservation. */
export type SharedCount = Pick<RateLimiterRedis, 'consume'>;

/** A policy's count in Redis, under `<prefix>:rl:<name>:<key>`. */
export function redisCount(
  name: PolicyName,
  policy: RatePolicy,
  redis: { readonly client: RedisClient; readonly prefix: string },
): SharedCount {
  return new RateLimiterRedis({
    storeClient: redis.client,
    keyPrefix: `${redis.prefix}:rl:${name}`,
    points: policy.points,
    duration: policy.duration,
    rejectIfRedisNotReady: true,
  });
}

export interface LeasedWindowOptions {
  readonly name: PolicyName;
  readonly points: number;
  readonly shared: SharedCount;
  /** Told of every reservation that failed, not refused (the limiter's own Redis breaker). */
  readonly health: Pick<RedisHealth, 'failed'>;
  /** The replicas sharing the points, read at each reservation. */
  readonly replicas: () => number;
  readonly now: () => number;
}

/**
 * One policy's leases, one per key; its reservations in flight, one per key at a time; and its
 * waiting demand, the decisions of this replica waiting for a key's next reservation, which
 * reserves for all of them.
 */
export class LeasedWindow {
  readonly #name: PolicyName;
  readonly #points: number;
  readonly #shared: SharedCount;
  readonly #health: Pick<RedisHealth, 'failed'>;
  readonly #replicas: () => number;
  readonly #now: () => number;
  readonly #leases = new Map<string, Lease>();
  readonly #reserving = new Map<string, Promise<boolean>>();
  readonly #waiting = new Map<string, number>();

  constructor(options: LeasedWindowOptions) {
    this.#name = options.name;
    this.#points = options.points;
    this.#shared = options.shared;
    this.#health = options.health;
    this.#replicas = options.replicas;
    this.#now = options.now;
  }

  /** A count for the key: from its lease, or after reserving; `undefined` if Redis failed. */
  count(key: string): PolicyCount | Promise<PolicyCount | undefined> {
    return this.#take(key) ?? this.#countReserved(key);
  }

  /** One point from the key's lease: a count, or `undefined` when a reservation is needed. */
  #take(key: string): PolicyCount | undefined {
    const lease = this.#leases.get(key);
    const at = this.#now();
    if (lease === undefined || lease.resetAt <= at) return undefined;
    const name = this.#name;
    const points = this.#points;
    if (lease.left > 0) {
      lease.left -= 1;
      // Refilled ahead, in the background, so that a busy key's decisions never wait for Redis.
      // Not for a batch of one (an allowance under 16 points per replica): a point reserved
      // ahead and never spent here would be one refused elsewhere, a large share of so small an
      // allowance; and so small an allowance is never busy enough for the round trip to matter.
      // The lease's own batch says which: it follows the replicas counted, as the points do.
      if (
        lease.batch > 1 &&
        lease.left <= lease.refillBelow &&
        lease.reservedTotal < points &&
        !this.#reserving.has(key)
      )
        void this.#reserve(key);
      return { name, points, consumed: lease.reservedTotal - lease.left, msBeforeNext: lease.resetAt - at };
    }
    // Nothing left here: refused until the window resets if the key is spent everywhere.
    return lease.reservedTotal >= points
      ? { name, points, consumed: points + 1, msBeforeNext: lease.resetAt - at }
      : undefined;
  }

  /** A count after reserving: `undefined` when Redis failed. */
  async #countReserved(key: string): Promise<PolicyCount | undefined> {
    this.#waiting.set(key, (this.#waiting.get(key) ?? 0) + 1);
    try {
      // Bounded: each round either leases points or learns that the key is spent everywhere.
      for (let round = 0; round < MAX_ROUNDS; round++) {
        if (!(await this.#reserve(key))) return undefined;
        const counted = this.#take(key);
        if (counted !== undefined) return counted;
      }
      return undefined;
    } finally {
      const left = (this.#waiting.get(key) ?? 1) - 1;
      if (left <= 0) this.#waiting.delete(key);
      else this.#waiting.set(key, left);
    }
  }

  /** Reserves a batch, or the waiting demand if larger (one reservation per key at a time). */
  #reserve(key: string): Promise<boolean> {
    const running = this.#reserving.get(key);
    if (running !== undefined) return running;
    const batch = nextBatch(this.#leases.get(key), this.#now(), largestBatch(this.#points, this.#replicas()));
    const size = Math.min(this.#points, Math.max(batch, this.#waiting.get(key) ?? 1));
    const started = this.#shared
      .consume(key, size)
      .then(
        (res) => res,
        (outcome: unknown) => {
          if (outcome instanceof RateLimiterRes) return outcome; // over the limit: still a count
          this.#health.failed();
          return undefined;
        },
      )
      .then((res) => {
        if (res === undefined) return false;
        this.#lease(key, res, size, batch);
        return true;
      })
      .finally(() => this.#reserving.delete(key));
    this.#reserving.set(key, started);
    return started;
  }

  /** The key's lease after a reservation of `size` points: its points, and what was left of the last one. */
  #lease(key: string, res: RateLimiterRes, size: number, batch: number): void {
    const points = this.#points;
    const before = res.consumedPoints - size;
    const previous = this.#leases.get(key);
    const carried = previous !== undefined && previous.resetAt > this.#now() ? previous.left : 0;
    if (this.#leases.size >= MAX_LEASES) this.#leases.clear(); // forgetting costs only a reservation
    const at = this.#now();
    this.#leases.set(key, {
      left: carried + Math.max(0, Math.min(size, points - before)),
      refillBelow: Math.floor(batch / 4),
      resetAt: at + res.msBeforeNext,
      // What counts is what can be spent: a reservation that crossed the limit is capped at it.
      reservedTotal: Math.min(res.consumedPoints, points),
      batch,
      reservedAt: at,
    });
  }
}
