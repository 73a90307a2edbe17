/**
 * The upstream budget (DESIGN §7): at most `upstream.maxConcurrent` requests in flight and
 * `upstream.maxPerSecond` started per second, for all replicas together, so the proxy's misses
 * never push the system of record over its own limit. `bottleneck`, clustered through Redis
 * (a `{hash-tagged}` id, so a Redis Cluster keeps its keys in one slot); while Redis is
 * unavailable each replica keeps to its share (`/ rateLimit.replicas`) with a local bottleneck.
 *
 * The rate is a reservoir refilled every 250 ms with a fifth of `maxPerSecond`. Every one-second
 * window then holds at most five refills, so the cap holds for every window, not just on average
 * (a once-a-second refill would allow twice the rate across a refill boundary).
 *
 * Nothing queues without bound: a request that gets no slot within `maxWaitMs` is refused (the
 * caller serves a stale copy or answers 503 with Retry-After), and its queued job runs as a no-op.
 */
import Bottleneck from 'bottleneck';
import { Cluster, Redis } from 'ioredis';
import { RedisHealth, clusterNodes } from '../cache/redis-connection.js';

export type BudgetResult<T> = { readonly kind: 'ran'; readonly value: T } | { readonly kind: 'refused' };

export interface UpstreamBudget {
  run<T>(job: () => Promise<T>, maxWaitMs: number): Promise<BudgetResult<T>>;
  close(): Promise<void>;
}

export interface UpstreamBudgetOptions {
  readonly maxConcurrent: number;
  readonly maxPerSecond: number;
  readonly replicas: number;
  readonly redis?:
    | {
        readonly url?: string | undefined;
        readonly clusterNodes?: readonly string[] | undefined;
        readonly prefix: string;
        /**
         * The cache connection's breaker, read only: the same Redis failing there is reason enough
         * to keep to the local share rather than wait for bottleneck's own timeout.
         */
        readonly sharedHealth: RedisHealth;
        /** Bottleneck's own commands time out like every other Redis command here. */
        readonly commandTimeoutMs: number;
      }
    | undefined;
  readonly onError?: (error: unknown) => void;
  /** Told of each failure of bottleneck's own Redis connection, for the metrics. */
  readonly onRedisFailure?: () => void;
}

const REFILLS_PER_SECOND = 4;
const BUDGET_COMMAND_TIMEOUT_MS = 250;
const REFILL_MS = 1000 / REFILLS_PER_SECOND;

function settings(maxConcurrent: number, maxPerSecond: number): Bottleneck.ConstructorOptions {
  // Refills in any one-second window: REFILLS_PER_SECOND + 1 (one at each edge).
  const perRefill = Math.max(1, Math.floor(maxPerSecond / (REFILLS_PER_SECOND + 1)));
  return {
    maxConcurrent,
    reservoir: perRefill,
    reservoirRefreshAmount: perRefill,
    reservoirRefreshInterval: REFILL_MS,
  };
}

const REFUSED = { kind: 'refused' } as const;

export function createUpstreamBudget(options: UpstreamBudgetOptions): UpstreamBudget {
  const share = (n: number): number => Math.max(1, Math.floor(n / options.replicas));
  const local = new Bottleneck(settings(share(options.maxConcurrent), share(options.maxPerSecond)));
  const redis = options.redis;

  interface Clustered {
    readonly limiter: Bottleneck;
    readonly connection: Bottleneck.IORedisConnection;
    /**
     * The breaker of bottleneck's own connection. Not the cache's: this connection reconnects on
     * its own schedule and loses its scripts' keys on a Redis restart, and suspending the cache
     * for that would leave fills unsaved and their leases unreleased.
     */
    readonly health: RedisHealth;
  }

  /**
   * Closes a clustered limiter through its connection: `limiter.disconnect()` on a connection
   * would unsubscribe without handling a refusal, an unhandled rejection while Redis is down.
   */
  function closeClustered(target: Clustered | undefined): Promise<void> {
    if (target === undefined) return Promise.resolve();
    // Not while bottleneck is still registering with Redis: its start-up scripts would fail on a
    // closed connection, in promises nobody handles. Bounded: a Redis that is down never answers.
    const settled = Promise.race([target.limiter.ready().then(
      () => undefined,
      () => undefined,
    ), new Promise<void>((resolve) => setTimeout(resolve, 1_000).unref())]);
    return settled
      .then(() => target.connection.disconnect(false))
      .then(
        () => undefined,
        () => undefined,
      );
  }

  function createClustered(): Clustered | undefined {
    if (redis === undefined) return undefined;
    // As for the cache (NOTES.md): a Redis that is down or hung must fail a call at once or within
    // the command timeout, so that the local share takes over, never stall a request.
    const clientOptions = {
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // Bottleneck's scripts are on the miss path only (never a hit's), and a spurious timeout
      // would switch this replica to its local share while its cluster slots are still held:
      // more room than the cache's 100 ms, still far below any request's patience.
      commandTimeout: Math.max(BUDGET_COMMAND_TIMEOUT_MS, redis.commandTimeoutMs),
      connectTimeout: 1_000,
      retryStrategy: (times: number) => Math.min(50 * times, 1_000),
    };
    const client =
      redis.clusterNodes !== undefined && redis.clusterNodes.length > 0
        ? new Cluster(
            clusterNodes(redis.clusterNodes),
            { redisOptions: clientOptions, enableOfflineQueue: false },
          )
        : new Redis(urlOf(redis.url), clientOptions);
    handleScriptRejections(client);
    const connection = new Bottleneck.IORedisConnection({ client });
    connection.on('error', (error: unknown) => options.onError?.(error));
    const limiter = new Bottleneck({
      ...settings(options.maxConcurrent, options.maxPerSecond),
      id: `{${redis.prefix}-upstream}`,
      datastore: 'ioredis',
      clearDatastore: false,
      connection,
      // Heartbeats free the slots of a replica that died holding them.
      heartbeatInterval: REFILL_MS,
      timeout: 60_000,
    });
    limiter.on('error', (error: unknown) => options.onError?.(error));
    // Bottleneck's start-up (its `init` and `register_client` scripts) is a promise that only its
    // later calls await: if Redis fails before one comes, the rejection would go unhandled.
    limiter.ready().catch((error: unknown) => options.onError?.(error));
    return { limiter, connection, health: new RedisHealth(client, options.onRedisFailure === undefined ? {} : { onFailure: options.onRedisFailure }) };
  }

  let clustered = createClustered();
  /** Jobs of this replica running under the cluster-wide limiter right now. */
  let clusteredInFlight = 0;
  const localShare = share(options.maxConcurrent);

  async function schedule<T>(limiter: Bottleneck, job: () => Promise<T>, maxWaitMs: number, health?: RedisHealth): Promise<BudgetResult<T>> {
    let abandoned = false;
    let timer: NodeJS.Timeout | undefined;
    const refused = new Promise<BudgetResult<T>>((resolve) => {
      timer = setTimeout(() => {
        abandoned = true;
        resolve(REFUSED);
      }, maxWaitMs);
    });
    // The answer goes back as soon as the job is done: bottleneck frees the slot afterwards, in
    // Redis, and a slow or hung Redis must not hold the request for that bookkeeping.
    let finished: ((result: BudgetResult<T>) => void) | undefined;
    const done = new Promise<BudgetResult<T>>((resolve) => {
      finished = resolve;
    });
    const ran = limiter.schedule(async (): Promise<BudgetResult<T>> => {
      if (abandoned) return REFUSED;
      clearTimeout(timer); // started in time: the request waits for its answer, not for the queue
      const result: BudgetResult<T> = { kind: 'ran', value: await job() };
      finished?.(result);
      return result;
    });
    try {
      return await Promise.race([done, ran, refused]);
    } finally {
      clearTimeout(timer);
      // A failure after the job ran (freeing its slot) is the breaker's business, not the request's.
      ran.catch((error: unknown) => {
        options.onError?.(error);
        health?.failed();
      });
    }
  }

  return {
    async run(job, maxWaitMs) {
      const current = clustered;
      if (current !== undefined && current.health.usable() && redis?.sharedHealth.usable() === true) {
        try {
          return await schedule(
            current.limiter,
            async () => {
              clusteredInFlight += 1;
              try {
                return await job();
              } finally {
                clusteredInFlight -= 1;
              }
            },
            maxWaitMs,
            current.health,
          );
        } catch (error) {
          options.onError?.(error);
          // A flushed or failed-over Redis loses bottleneck's settings: every call then fails
          // until the limiter is created again (bottleneck issues #205, #219).
          if (error instanceof Error && error.message.includes('SETTINGS_KEY_NOT_FOUND') && clustered === current) {
            clustered = createClustered();
            void closeClustered(current);
          }
          current.health.failed();
        }
      }
      // This replica's cluster-wide jobs still running count against its local share: switching
      // modes must not add a share on top of the slots already held.
      if (clusteredInFlight >= localShare) return REFUSED;
      return schedule(local, job, maxWaitMs);
    },
    async close() {
      await Promise.all([Promise.resolve().then(() => local.stop({ dropWaitingJobs: true })), closeClustered(clustered)]).catch(() => undefined);
    },
  };
}

/**
 * Bottleneck runs its scripts with a callback and drops the promise ioredis also returns; when a
 * command fails (Redis down, connection closing) that promise rejects unhandled, which would
 * stop the process. Every script command defined on bottleneck's client gets its promise handled
 * here; bottleneck still receives the error through its callback.
 */
function handleScriptRejections(client: Redis | Cluster): void {
  const commands = client as unknown as Record<string, unknown>;
  const define = client.defineCommand.bind(client);
  client.defineCommand = (name, definition) => {
    define(name, definition);
    const command = commands[name];
    if (typeof command !== 'function') return;
    commands[name] = (...args: unknown[]): unknown => {
      const result: unknown = Reflect.apply(command, client, args);
      if (result instanceof Promise) result.catch(() => undefined);
      return result;
    };
  };
}

/** The budget's Redis is the cache's: never a silent default of localhost. */
function urlOf(url: string | undefined): string {
  if (url === undefined) throw new TypeError('REDIS_URL or REDIS_CLUSTER_NODES is required for the clustered upstream budget');
  return url;
}
