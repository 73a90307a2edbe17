/**
 * Cluster-wide request coalescing (docs/cache.md). Within a process the read service keeps one fetch
 * per key; across replicas a short Redis lease elects one fetcher, and the others wait for its
 * fill: a pub/sub announcement (one channel, one subscription per process), with a poll of the
 * lease as the fallback for a lost message or a leader that died. Waits are bounded; then the
 * follower fetches itself.
 */
import { randomUUID } from 'node:crypto';
import type { RedisClient } from '../../platform/redis/connection.js';
import type { RedisHealth } from '../../platform/redis/health.js';
import type { CacheAddress } from '../entry/cache-key.js';

export type LeaseOutcome = 'acquired' | 'held' | 'unavailable';

export interface FillCoordinator {
  /** Tries to become this key's fetcher across replicas. */
  tryLease(address: CacheAddress): Promise<LeaseOutcome>;
  /** Gives the lease up and tells waiting replicas to look (after the entry was saved, if any). */
  release(address: CacheAddress): Promise<void>;
  /** Resolves when the key's fill is announced, its lease is gone, or `maxWaitMs` passed. */
  waitForFill(address: CacheAddress, maxWaitMs: number): Promise<void>;
  /** Tells `listener` the key of every fill another replica announced. */
  onFilled(listener: (key: string) => void): void;
  close(): Promise<void>;
}

/** One process, nothing to coordinate: in-process coalescing already gives one fetch per key. */
export const LOCAL_COORDINATOR: FillCoordinator = {
  tryLease: () => Promise.resolve('acquired'),
  release: () => Promise.resolve(),
  waitForFill: () => Promise.resolve(),
  onFilled: () => undefined,
  close: () => Promise.resolve(),
};

/**
 * Takes the lease (ARGV[1]: this fill's token), or takes it over when it is held by this process
 * (ARGV[3]: the process's token prefix): a fill never waits on a lease its own process left
 * behind (a release lost to a Redis restart or a timeout), since the read service runs one fill
 * per key per process — that lease's fill is over.
 */
const LEASE_SCRIPT = `local holder = redis.call('get', KEYS[1])
if holder == false or string.sub(holder, 1, string.len(ARGV[3])) == ARGV[3] then
  redis.call('set', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`;

const RELEASE_SCRIPT = `if redis.call('get', KEYS[1]) == ARGV[1] then redis.call('del', KEYS[1]) end
redis.call('publish', ARGV[2], ARGV[3])
return 1`;

export interface RedisCoordinatorOptions {
  readonly client: RedisClient;
  readonly subscriber: RedisClient;
  readonly health: RedisHealth;
  readonly channel: string;
  /** Lease lifetime: longer than one upstream exchange, so only a dead leader's lease expires. */
  readonly leaseMs: number;
  /** Lease poll period while waiting (default 100 ms). */
  readonly pollMs?: number;
}

/**
 * Lease tokens are `<process>:<fill>`: a release removes its own fill's lease, never a newer one,
 * and the prefix tells a lease this process left behind (`LEASE_SCRIPT`).
 */
class LeaseTokens {
  readonly prefix = `${randomUUID()}:`;
  #fills = 0;

  next(): string {
    this.#fills += 1;
    return `${this.prefix}${String(this.#fills)}`;
  }
}

/** The leases this process's fills hold: lease key → the holding fill's token. */
class HeldLeases {
  readonly #held = new Map<string, string>();

  hold(leaseKey: string, token: string): void {
    this.#held.set(leaseKey, token);
  }

  /** The token holding `leaseKey`, forgotten here: a lease is released once. */
  take(leaseKey: string): string | undefined {
    const token = this.#held.get(leaseKey);
    if (token !== undefined) this.#held.delete(leaseKey);
    return token;
  }
}

/**
 * The announcements of this process's own releases not heard back yet: a fill's own announcement
 * wakes waiters like every other, but tells the fill listeners nothing new (the fill's entry is held
 * here already). Bounded: an announcement lost on the way leaves its key behind, cleared with the
 * rest past `MAX_OWN`, at the cost of one listener told of an own fill.
 */
class OwnAnnouncements {
  static readonly MAX_OWN = 10_000;
  readonly #pending = new Map<string, number>();

  sent(key: string): void {
    if (this.#pending.size >= OwnAnnouncements.MAX_OWN) this.#pending.clear();
    this.#pending.set(key, (this.#pending.get(key) ?? 0) + 1);
  }

  /** Whether `key`'s announcement heard now is one of this process's own (then no longer pending). */
  heard(key: string): boolean {
    const count = this.#pending.get(key);
    if (count === undefined) return false;
    if (count <= 1) this.#pending.delete(key);
    else this.#pending.set(key, count - 1);
    return true;
  }
}

/** Replicas' waits for a key's fill, woken by its announcement or after their own time. */
class FillWaiters {
  readonly #waiters = new Map<string, Set<() => void>>();

  /** Resolves when `key`'s fill is announced or `ms` passed. */
  wait(key: string, ms: number): Promise<void> {
    return new Promise((resolve) => {
      const waiters = this.#waiters;
      const set = waiters.get(key) ?? new Set();
      waiters.set(key, set);
      const done = (): void => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0 && waiters.get(key) === set) waiters.delete(key);
        resolve();
      };
      const timer = setTimeout(done, ms);
      set.add(done);
    });
  }

  /** `key`'s fill was announced: every wait for it ends. */
  wake(key: string): void {
    const wake = this.#waiters.get(key);
    if (wake === undefined) return;
    this.#waiters.delete(key);
    for (const resolve of wake) resolve();
  }

  wakeAll(): void {
    for (const set of this.#waiters.values()) for (const resolve of set) resolve();
    this.#waiters.clear();
  }
}

class RedisCoordinator implements FillCoordinator {
  readonly #options: RedisCoordinatorOptions;
  readonly #pollMs: number;
  readonly #tokens = new LeaseTokens();
  readonly #held = new HeldLeases();
  readonly #waiters = new FillWaiters();
  readonly #filled: Array<(key: string) => void> = [];
  readonly #own = new OwnAnnouncements();

  constructor(options: RedisCoordinatorOptions) {
    this.#options = options;
    this.#pollMs = options.pollMs ?? 100;
    const { subscriber, channel } = options;
    subscriber.on('message', (from: string, key: string) => {
      if (from !== channel) return;
      this.#waiters.wake(key);
      if (this.#own.heard(key)) return;
      for (const listener of this.#filled) listener(key);
    });
    // Not awaited: a start with Redis down must not wait for it; ioredis resubscribes on reconnect.
    subscriber.subscribe(channel).catch(() => undefined);
  }

  async tryLease(address: CacheAddress): Promise<LeaseOutcome> {
    const { client, health, leaseMs } = this.#options;
    if (!health.usable(address.leaseKey)) return 'unavailable';
    try {
      const token = this.#tokens.next();
      const taken = await client.eval(LEASE_SCRIPT, 1, address.leaseKey, token, leaseMs, this.#tokens.prefix);
      if (taken !== 1) return 'held';
      this.#held.hold(address.leaseKey, token);
      return 'acquired';
    } catch (error) {
      health.failed(address.leaseKey, error);
      return 'unavailable';
    }
  }

  async release(address: CacheAddress): Promise<void> {
    // Tried even while the breaker is open (the read service does not wait for it): a lease
    // left behind would hold other replicas' fills until it expires. Without a connection the
    // command fails at once.
    const token = this.#held.take(address.leaseKey);
    if (token === undefined) return;
    const { client, health, channel } = this.#options;
    try {
      this.#own.sent(address.key);
      await client.eval(RELEASE_SCRIPT, 1, address.leaseKey, token, channel, address.key);
    } catch (error) {
      this.#own.heard(address.key); // no announcement to expect (or one heard as another's: a read)
      health.failed(address.leaseKey, error); // the lease expires by itself; waiters poll
    }
  }

  async waitForFill(address: CacheAddress, maxWaitMs: number): Promise<void> {
    const deadline = performance.now() + maxWaitMs;
    for (;;) {
      const left = deadline - performance.now();
      if (left <= 0) return;
      await this.#waiters.wait(address.key, Math.min(this.#pollMs, left));
      try {
        if ((await this.#options.client.exists(address.leaseKey)) === 0) return; // filled, failed or leader gone
      } catch {
        return; // Redis is failing: stop waiting and fetch
      }
    }
  }

  onFilled(listener: (key: string) => void): void {
    this.#filled.push(listener);
  }

  async close(): Promise<void> {
    this.#waiters.wakeAll();
  }
}

export function createRedisCoordinator(options: RedisCoordinatorOptions): FillCoordinator {
  return new RedisCoordinator(options);
}
