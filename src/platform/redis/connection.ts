/**
 * Redis connections tuned for a cache (docs/architecture.md#ioredis-defaults-that-hurt-a-cache): no offline
 * queue (a command fails at once while disconnected instead of queueing for ~10 s), no retries per
 * request, no re-sending of unfulfilled commands, a command timeout of at most 100 ms (the only
 * bound on a hung server), auto-pipelining for the hit path, and fast reconnection so that the
 * cache recovers by itself.
 *
 * `RedisHealth` (health.ts) adds a short circuit breaker: after a timeout or a connection error the
 * store is skipped for a moment, so a hung Redis costs one request the timeout, not every request.
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { ClusterSeeds } from './cluster-seeds.js';
import { CommandTimeouts } from './command-timeout.js';

export type RedisClient = Redis | Cluster;

export interface RedisConnectionOptions {
  readonly url?: string | undefined;
  /** `host:port` seed nodes of a Redis Cluster. */
  readonly clusterNodes?: readonly string[] | undefined;
  readonly commandTimeoutMs: number;
  /** Pub/sub connections keep an offline queue so that (re)subscribing waits for the connection. */
  readonly subscriber?: boolean;
  readonly onError?: (error: Error) => void;
}

/**
 * A command on a failed master fails at once instead of being retried for ~1.6 s (ioredis retries
 * "Connection is closed" 16 times, 100 ms apart, by default): measured, one master killed stalled
 * every request that touched its slots, and the closed-loop throughput fell to 2 requests/s. The
 * node's breaker (`RedisHealth`) then skips it, and the slot map is refreshed every second (and at
 * once on a failure) so that the promoted replica is found as soon as it serves.
 */
export const FAIL_FAST_CLUSTER_OPTIONS = {
  retryDelayOnFailover: 0,
  retryDelayOnClusterDown: 0,
  retryDelayOnTryAgain: 0,
  // A MOVED after a failover is followed at once (one redirection); a loop of them is not.
  maxRedirections: 4,
  slotsRefreshInterval: 1_000,
} as const;

/** The longest wait between two attempts to reconnect, ms. */
export const RECONNECT_MAX_MS = 500;

export function createRedisClient(options: RedisConnectionOptions): RedisClient {
  // The cache's is at most 100 ms (the config's bound); the operator state's reads may take longer.
  if (!(options.commandTimeoutMs > 0 && options.commandTimeoutMs <= 10_000)) {
    throw new TypeError('a Redis command timeout must be from 1 to 10000 ms');
  }
  const subscriber = options.subscriber === true;
  const redisOptions: RedisOptions = {
    enableOfflineQueue: subscriber,
    maxRetriesPerRequest: subscriber ? null : 0,
    autoResendUnfulfilledCommands: false,
    // Batches the commands issued in one synchronous run into one write (never on a cluster).
    enableAutoPipelining: !subscriber,
    connectTimeout: 1_000,
    // At most half a second between attempts: a replica hears of Redis's return within that (the
    // upstream budget's rejoin window counts on it: src/upstream-guard/upstream-budget.ts).
    retryStrategy: (times: number) => Math.min(50 * times, RECONNECT_MAX_MS),
    lazyConnect: false,
  };
  let client: RedisClient;
  if (options.clusterNodes !== undefined && options.clusterNodes.length > 0) {
    const seeds = new ClusterSeeds(options.clusterNodes);
    const cluster = new Cluster(seeds.initial, {
      redisOptions: { ...redisOptions, enableAutoPipelining: false },
      enableOfflineQueue: subscriber,
      // ioredis's ready check sends `CLUSTER INFO` to a node drawn at random and, without an
      // offline queue, fails when that node is still connecting; seed nodes that became replicas
      // always are (ioredis has just sent them `READONLY`), so a client given such seeds would
      // never become ready. The slot map was read from a live node already; a node that cannot
      // serve fails its commands, and the node's breaker (`RedisHealth`) skips it.
      enableReadyCheck: false,
      // Not on a cluster: ioredis's auto-pipelining reads the slot map without a check, and a
      // command sent while the client had no slots yet, run once a partial map arrived (a cluster
      // still forming), threw outside any promise and stopped the process (seen in
      // test/system/replica-reconnect.test.ts). Batching across requests is rare anyway: a batch
      // forms only from commands issued in one synchronous run.
      enableAutoPipelining: false,
      clusterRetryStrategy: (times: number) => Math.min(100 * times, RECONNECT_MAX_MS),
      // A subscription may wait for the cluster; a command may not.
      ...(subscriber ? {} : FAIL_FAST_CLUSTER_OPTIONS),
    });
    seeds.attach(cluster);
    // Every address of the configured names, for the first retry already.
    void seeds.resolve().then(() => seeds.applyTo(cluster));
    reconnectWhenStuck(cluster, seeds, options.onError);
    client = cluster;
  } else if (options.url !== undefined) {
    client = new Redis(options.url, redisOptions);
  } else {
    throw new TypeError('REDIS_URL or REDIS_CLUSTER_NODES is required for a Redis connection');
  }
  // Not ioredis's `commandTimeout`: a timer that a held-up event loop cannot fake (command-timeout.ts).
  if (!subscriber) armTimeouts(client, options.commandTimeoutMs);
  // Without a listener ioredis reports every connection error as unhandled.
  client.on('error', (error: Error) => options.onError?.(error));
  return client;
}

/** The client's commands time out; a cluster's nodes' connections too, those made later included. */
function armTimeouts(client: RedisClient, timeoutMs: number): void {
  const timeouts = new CommandTimeouts(timeoutMs);
  timeouts.arm(client);
  if (!(client instanceof Cluster)) return;
  // The seed nodes' connections are made in the constructor already; later ones are announced.
  for (const node of client.nodes('all')) timeouts.arm(node);
  client.on('+node', (node: Redis) => timeouts.arm(node));
}

/** How long a cluster client may stay unready before it starts over from its seed nodes. */
export const STUCK_CLUSTER_MS = 5_000;

/**
 * A replica never stays cut off from its cluster. ioredis retries on its own;
 * should its cluster client still not be ready after `STUCK_CLUSTER_MS`, it is made to start over:
 * a new connection to the seed nodes (resolved again, with every node of the last slot map: see
 * `src/platform/redis/cluster-seeds.ts`) and a fresh slot map, every `STUCK_CLUSTER_MS` until it is
 * ready. A client closed on purpose stops.
 */
function reconnectWhenStuck(
  cluster: Cluster,
  seeds: ClusterSeeds,
  onError: ((error: Error) => void) | undefined,
  now: () => number = Date.now,
): void {
  let unreadySince: number | undefined = now();
  cluster.on('ready', () => {
    unreadySince = undefined;
  });
  const watchdog = setInterval(() => {
    if (cluster.status === 'end') return clearInterval(watchdog); // closed on purpose
    if (cluster.status === 'ready') return;
    unreadySince ??= now();
    if (now() - unreadySince < STUCK_CLUSTER_MS) return;
    unreadySince = now();
    onError?.(
      new Error(`Redis Cluster not ready for ${String(STUCK_CLUSTER_MS)} ms: reconnecting from the seed nodes`),
    );
    void seeds.resolve().then(() => {
      if (cluster.status === 'end' || cluster.status === 'ready') return;
      seeds.applyTo(cluster);
      cluster.disconnect(true);
    });
  }, 1_000);
  watchdog.unref();
}

/**
 * Resolves once the client is connected, or after `maxWaitMs`: a start waits for Redis, but never
 * hangs on a Redis that is down (it then serves degraded and Redis catches up).
 */
export function readyWithin(client: RedisClient, maxWaitMs: number): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise<void>((resolve) => {
    const timer = setTimeout(done, maxWaitMs);
    timer.unref();
    function done(): void {
      clearTimeout(timer);
      client.off('ready', done);
      resolve();
    }
    client.once('ready', done);
  });
}

/** Where the replicas' shared Redis is (`REDIS_URL` or `REDIS_CLUSTER_NODES`, and `CONTROL_REDIS_URL`). */
export interface RedisSettings {
  readonly url?: string | undefined;
  readonly clusterNodes?: readonly string[] | undefined;
  /** A Redis of its own for the operator state; else the one above. */
  readonly controlUrl?: string | undefined;
}

/** A shared Redis is configured (else the cache is in-process: one replica). */
export function isSharedRedis(settings: RedisSettings | undefined): settings is RedisSettings {
  return settings?.url !== undefined || (settings?.clusterNodes !== undefined && settings.clusterNodes.length > 0);
}

export type RedisComponent = 'cache' | 'budget' | 'control';

/** Every connection a replica holds to Redis, made in one place with one set of options. */
export interface SharedRedis {
  /** The cache's commands: the store, the leases, the inbound limits, the upstream pauses. */
  readonly client: RedisClient;
  /** The cache's subscriptions: fills and purges. */
  readonly subscriber: RedisClient;
  /** The operator state's commands and subscriptions (its own Redis, or the cache's). */
  readonly control: { readonly client: RedisClient; readonly subscriber: RedisClient };
  /** The upstream budget's connection, with a command timeout of its own. */
  readonly budget: { readonly client: RedisClient; readonly commandTimeoutMs: number };
  /** Resolves once the cache's and the operator state's connections are ready, or after `maxWaitMs`. */
  ready(maxWaitMs: number): Promise<void>;
  close(): void;
}

export interface SharedRedisOptions {
  /** The cache's command timeout (`redis.commandTimeoutMs`, at most 100 ms). */
  readonly commandTimeoutMs: number;
  readonly onError?: (component: RedisComponent, error: Error) => void;
}

/** The operator state's reads may take longer than a cache lookup (they never stall a request). */
const CONTROL_COMMAND_TIMEOUT_MS = 1_000;
/**
 * The upstream budget's calls are on the miss path only, and a spurious timeout stops its grants
 * until the next heartbeat answers: more room than the cache's 100 ms.
 */
const BUDGET_COMMAND_TIMEOUT_MS = 250;

export function connectRedis(settings: RedisSettings, options: SharedRedisOptions): SharedRedis {
  const shared = { url: settings.url, clusterNodes: settings.clusterNodes };
  const connect = (
    component: RedisComponent,
    commandTimeoutMs: number,
    where = shared,
    subscriber = false,
  ): RedisClient =>
    createRedisClient({
      ...where,
      commandTimeoutMs,
      subscriber,
      onError: (error) => options.onError?.(component, error),
    });
  const client = connect('cache', options.commandTimeoutMs);
  const subscriber = connect('cache', options.commandTimeoutMs, shared, true);
  const controlWhere =
    settings.controlUrl === undefined ? shared : { url: settings.controlUrl, clusterNodes: undefined };
  const control = {
    client: connect('control', CONTROL_COMMAND_TIMEOUT_MS, controlWhere),
    // One subscription connection serves every channel of one Redis.
    subscriber:
      settings.controlUrl === undefined
        ? subscriber
        : connect('control', CONTROL_COMMAND_TIMEOUT_MS, controlWhere, true),
  };
  const budgetTimeoutMs = Math.max(BUDGET_COMMAND_TIMEOUT_MS, options.commandTimeoutMs);
  const budget = { client: connect('budget', budgetTimeoutMs), commandTimeoutMs: budgetTimeoutMs };
  const all = [...new Set([client, subscriber, control.client, control.subscriber, budget.client])];
  return {
    client,
    subscriber,
    control,
    budget,
    async ready(maxWaitMs) {
      await Promise.all([readyWithin(client, maxWaitMs), readyWithin(control.client, maxWaitMs)]);
    },
    close() {
      for (const connection of all) connection.disconnect();
    },
  };
}
