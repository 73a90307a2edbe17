/**
 * The upstream budget (README, "Limits"): at most `upstream.maxConcurrent` requests in flight and
 * `upstream.maxPerSecond` started in any one second, for all replicas together, so the proxy's
 * misses never push the system of record over its own limit. `bottleneck`, clustered through
 * Redis (a `{hash-tagged}` id, so a Redis Cluster keeps its keys in one slot); while that Redis is
 * unusable each replica keeps to its share (`/ rateLimit.replicas`) with a local bottleneck.
 *
 * Why it holds where bottleneck's defaults did not (issue 8):
 * - The rate is `minTime`, a spacing between starts kept in Redis, not a reservoir: bottleneck
 *   refills a reservoir only on its heartbeat, so a reservoir sized to never exceed the cap in any
 *   window delivered 80% of it at best. The spacing carries a small allowance (`RATE_JITTER_MS`)
 *   for a start that runs late, so that no one-second window at the upstream ever sees one more.
 * - Requests wait in a queue of their own (`SlotQueue`): one that gives up consumes nothing.
 * - Every slot carries an `expiration`: a slot whose release never reaches Redis (a failover, a
 *   dropped connection, a dead replica) comes back by itself after `upstream.timeout` + 2 s.
 * - The settings in Redis are written from the config at every start (and on `SIGHUP`): bottleneck
 *   otherwise keeps the ones stored by the first replica ever started on that id.
 */
import Bottleneck from 'bottleneck';
import type { Cluster, Redis } from 'ioredis';
import { type RedisClient, RedisHealth } from '../platform/redis.js';
import { type Slot, SlotQueue } from './slot-queue.js';

export type BudgetResult<T> = { readonly kind: 'ran'; readonly value: T } | { readonly kind: 'refused' };

export interface BudgetSettings {
  readonly maxConcurrent: number;
  readonly maxPerSecond: number;
}

export interface UpstreamBudget {
  run<T>(job: () => Promise<T>, maxWaitMs: number): Promise<BudgetResult<T>>;
  /** New limits for every replica (a reloaded config); resolves once Redis has them, when shared. */
  apply(settings: BudgetSettings): Promise<void>;
  /** Requests of this replica waiting for a slot now. */
  waiting(): number;
  /**
   * Resolves once the shared limits are in force (`true`), or after `maxWaitMs` (`false`: the
   * local share meanwhile); at once without Redis. A start waits for it before it takes requests.
   */
  whenShared(maxWaitMs: number): Promise<boolean>;
  /** The replicas were counted anew: this replica's local share follows. */
  rescale(): Promise<void>;
  close(): Promise<void>;
}

export interface UpstreamBudgetOptions extends BudgetSettings {
  readonly replicas: number;
  /** The replicas counted through Redis, when they have been: the local share follows them. */
  readonly liveReplicas?: (() => number | undefined) | undefined;
  /** How long a slot may be held at most, ms (the upstream deadline): slots expire after it. */
  readonly holdMs: number;
  readonly redis?:
    | {
        /** A new connection for bottleneck (one now, another if the limiter must be made anew). */
        readonly connect: () => RedisClient;
        readonly prefix: string;
        /**
         * The cache connection's breaker, read only: the same Redis failing there is reason enough
         * to keep to the local share rather than wait for bottleneck's own timeout.
         */
        readonly sharedHealth: RedisHealth;
      }
    | undefined;
  readonly onError?: (error: unknown) => void;
  /** Told of each failure of bottleneck's own Redis connection, for the metrics. */
  readonly onRedisFailure?: () => void;
}

/**
 * A start that runs this late (a busy event loop, a slow connection) still never makes one window
 * of one second hold more than `maxPerSecond` starts: the spacing is (1 000 + this) / maxPerSecond.
 */
const RATE_JITTER_MS = 100;
/** Slots outlive the exchange that holds them by this much before bottleneck frees them. */
const EXPIRATION_MARGIN_MS = 2_000;
/** Heartbeats: how soon a capacity change reaches a replica that missed its message. */
const HEARTBEAT_MS = 250;

/** Bottleneck's store settings for a cap; the reservoir fields are cleared (older versions used them). */
function storeSettings(settings: BudgetSettings): Bottleneck.ConstructorOptions {
  return {
    maxConcurrent: settings.maxConcurrent,
    minTime: (1_000 + RATE_JITTER_MS) / settings.maxPerSecond,
    reservoir: null,
    reservoirRefreshAmount: null,
    reservoirRefreshInterval: null,
  };
}

/**
 * Tickets outstanding per replica: enough for the starts of ~10 ms (so that the next start is always
 * lined up, however high the rate), at least 2, never more than the concurrency.
 */
function maxPending(settings: BudgetSettings): number {
  return Math.min(settings.maxConcurrent, Math.max(2, Math.ceil(settings.maxPerSecond / 100)));
}

const REFUSED = { kind: 'refused' } as const;

interface Clustered {
  readonly limiter: Bottleneck;
  readonly connection: Bottleneck.IORedisConnection;
  readonly queue: SlotQueue;
  /**
   * The breaker of bottleneck's own connection. Not the cache's: this connection reconnects on
   * its own schedule and loses its scripts' keys on a Redis restart, and suspending the cache
   * for that would leave fills unsaved and their leases unreleased.
   */
  readonly health: RedisHealth;
  /** Until the config's limits are in Redis, the limiter may still hold older ones: not used. */
  settled: boolean;
  /** Resolves when `settled` becomes true (never, if it does not). */
  readonly onSettled: Promise<void>;
}

export function createUpstreamBudget(options: UpstreamBudgetOptions): UpstreamBudget {
  let current: BudgetSettings = { maxConcurrent: options.maxConcurrent, maxPerSecond: options.maxPerSecond };
  const share = (settings: BudgetSettings): BudgetSettings => ({
    maxConcurrent: Math.max(1, Math.floor(settings.maxConcurrent / (options.liveReplicas?.() ?? options.replicas))),
    maxPerSecond: Math.max(1, Math.floor(settings.maxPerSecond / (options.liveReplicas?.() ?? options.replicas))),
  });
  const expirationMs = options.holdMs + EXPIRATION_MARGIN_MS;
  const localLimiter = new Bottleneck(storeSettings(share(current)));
  const local = new SlotQueue({ limiter: localLimiter, maxPending: maxPending(share(current)), expirationMs });
  const redis = options.redis;
  /** The limiter's id (a hash tag: one cluster slot), and a key in that slot for the breaker. */
  const budgetId = `{${redis?.prefix ?? ''}:budget}`;
  const budgetKey = `b_${budgetId}_settings`;

  /**
   * Closes a clustered limiter through its connection: `limiter.disconnect()` on a connection
   * would unsubscribe without handling a refusal, an unhandled rejection while Redis is down.
   */
  function closeClustered(target: Clustered | undefined): Promise<void> {
    if (target === undefined) return Promise.resolve();
    target.queue.close();
    // Not while bottleneck is still registering with Redis: its start-up scripts would fail on a
    // closed connection, in promises nobody handles. Bounded: a Redis that is down never answers.
    const settled = Promise.race([
      target.limiter.ready().then(
        () => undefined,
        () => undefined,
      ),
      new Promise<void>((resolve) => setTimeout(resolve, 1_000).unref()),
    ]);
    return settled
      .then(() => target.connection.disconnect(false))
      .then(
        () => undefined,
        () => undefined,
      );
  }

  function createClustered(): Clustered | undefined {
    if (redis === undefined) return undefined;
    // As for the cache (src/platform/redis.ts): a Redis that is down or hung fails a call at once or
    // within the command timeout, so that the local share takes over; never a stalled request.
    const client = redis.connect();
    handleScriptRejections(client);
    const connection = new Bottleneck.IORedisConnection({ client });
    connection.on('error', (error: unknown) => options.onError?.(error));
    const health = new RedisHealth(
      client,
      options.onRedisFailure === undefined ? {} : { onFailure: options.onRedisFailure },
    );
    const limiter = new Bottleneck({
      ...storeSettings(current),
      // Not the `-upstream` id of earlier versions: its stored settings expired keys in whole ms.
      id: budgetId,
      datastore: 'ioredis',
      clearDatastore: false,
      connection,
      heartbeatInterval: HEARTBEAT_MS,
      // No `timeout`: its key expiry takes whole milliseconds, and the spacing is fractional. The
      // limiter's few keys stay (and, without an expiry, are never evicted under volatile-lru).
    });
    limiter.on('error', (error: unknown) => options.onError?.(error));
    // The config's limits, not the ones a replica started long ago left in Redis; the limiter is
    // used only once they are there (meanwhile the local share keeps to this replica's part).
    let markSettled: () => void = () => undefined;
    const onSettled = new Promise<void>((resolve) => {
      markSettled = resolve;
    });
    limiter
      .ready()
      .then(() => limiter.updateSettings(storeSettings(current)))
      .then(() => {
        target.settled = true;
        markSettled();
      })
      // Bottleneck's start-up is a promise that only its later calls await: if Redis fails before
      // one comes, the rejection would go unhandled.
      .catch((error: unknown) => options.onError?.(error));
    const queue = new SlotQueue({
      limiter,
      maxPending: maxPending(current),
      expirationMs,
      onFailure: (error) => {
        options.onError?.(error);
        health.failed();
        recreateAfter(error, target);
      },
    });
    const target: Clustered = { limiter, connection, queue, health, settled: false, onSettled };
    return target;
  }

  let clustered = createClustered();

  /**
   * A flushed or failed-over Redis loses bottleneck's settings (bottleneck issues #205, #219).
   * Bottleneck itself runs `init` again on that error (see `asBottleneckSaysIt`); should the error
   * still reach a job, the limiter is created anew, once.
   */
  function recreateAfter(error: unknown, failed: Clustered): void {
    if (!(error instanceof Error && error.message.includes('SETTINGS_KEY_NOT_FOUND')) || clustered !== failed) return;
    clustered = createClustered();
    void closeClustered(failed);
  }

  /** This replica's jobs running under the cluster-wide limiter right now. */
  let clusteredInFlight = 0;

  async function hold<T>(slot: Slot, job: () => Promise<T>, counted: boolean): Promise<BudgetResult<T>> {
    if (counted) clusteredInFlight += 1;
    try {
      return { kind: 'ran', value: await job() };
    } finally {
      if (counted) clusteredInFlight -= 1;
      slot.release(); // the answer never waits for bottleneck's bookkeeping in Redis
    }
  }

  return {
    async run(job, maxWaitMs) {
      const deadline = Date.now() + maxWaitMs;
      const target = clustered;
      // The cache's breaker is read for the node that holds the budget's keys: that node failing a
      // lookup is reason enough to keep to the local share at once.
      if (target?.settled === true && target.health.usable() && redis?.sharedHealth.usable(budgetKey) === true) {
        const acquired = await target.queue.acquire(maxWaitMs);
        if (acquired.kind === 'slot') return hold(acquired.slot, job, true);
        if (acquired.kind === 'timeout') return REFUSED;
        // The shared limiter failed: this request keeps to the local share for the time it has left.
      }
      // This replica's cluster-wide jobs still running count against its local share: switching
      // modes must not add a share on top of the slots already held.
      if (clusteredInFlight >= share(current).maxConcurrent) return REFUSED;
      const left = deadline - Date.now();
      if (left <= 0) return REFUSED;
      const acquired = await local.acquire(left);
      return acquired.kind === 'slot' ? hold(acquired.slot, job, false) : REFUSED;
    },
    async apply(settings) {
      current = settings;
      await localLimiter.updateSettings(storeSettings(share(settings)));
      const target = clustered;
      if (target !== undefined) await target.limiter.updateSettings(storeSettings(settings));
    },
    waiting: () => local.waiting + (clustered?.queue.waiting ?? 0),
    async whenShared(maxWaitMs) {
      const target = clustered;
      if (target === undefined) return false;
      if (target.settled) return true;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<boolean>((resolve) => {
        timer = setTimeout(() => resolve(false), Math.max(0, maxWaitMs));
        timer.unref();
      });
      const shared = await Promise.race([target.onSettled.then(() => true), timedOut]);
      clearTimeout(timer);
      return shared;
    },
    async rescale() {
      await localLimiter.updateSettings(storeSettings(share(current)));
    },
    async close() {
      local.close();
      await Promise.all([
        Promise.resolve().then(() => localLimiter.stop({ dropWaitingJobs: true })),
        closeClustered(clustered),
      ]).catch(() => undefined);
    },
  };
}

/**
 * Bottleneck recovers by itself from a Redis that lost its keys (`SETTINGS_KEY_NOT_FOUND`: it runs
 * `init` again) and from having been dropped as a client (`UNKNOWN_CLIENT`: it registers again),
 * but it recognises those errors by their exact text, and Redis 7 prefixes a script's error with
 * `ERR `: without this, a limiter that met either stayed broken for good (every call failed).
 */
const BOTTLENECK_ERRORS = ['SETTINGS_KEY_NOT_FOUND', 'UNKNOWN_CLIENT'];

function asBottleneckSaysIt(error: unknown): unknown {
  if (!(error instanceof Error)) return error;
  const bare = error.message.replace(/^ERR /, '');
  if (BOTTLENECK_ERRORS.includes(bare)) error.message = bare;
  return error;
}

/**
 * Every script command defined on bottleneck's client: its errors reach bottleneck's callback as
 * bottleneck spells them, and the promise ioredis also returns (which bottleneck drops) is handled,
 * else a failing command (Redis down, connection closing) would be an unhandled rejection.
 */
function handleScriptRejections(client: Redis | Cluster): void {
  const commands = client as unknown as Record<string, unknown>;
  const define = client.defineCommand.bind(client);
  client.defineCommand = (name, definition) => {
    define(name, definition);
    const command = commands[name];
    if (typeof command !== 'function') return;
    commands[name] = (...args: unknown[]): unknown => {
      const callback = args.at(-1);
      if (typeof callback === 'function') {
        args[args.length - 1] = (error: unknown, result: unknown): unknown =>
          Reflect.apply(callback, undefined, [asBottleneckSaysIt(error), result]);
      }
      const result: unknown = Reflect.apply(command, client, args);
      if (result instanceof Promise) result.catch(() => undefined);
      return result;
    };
  };
}
