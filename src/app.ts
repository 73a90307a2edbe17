/**
 * The one place where the proxy is wired, in the order of the request flow (docs/architecture.md#the-request-flow):
 * data plane (canonicalise → authenticate → authorise → validate) → read service (L1 → store →
 * coalesced fill) → upstream; then the Express fallback plane, and the admin plane on its own port.
 */
import type { IncomingMessage, Server, ServerResponse } from 'node:http';
import type { Logger } from 'pino';
import { type AccessLists, accessListsOver } from './auth/access-lists.js';
import { createAuthenticator } from './auth/authenticate.js';
import type { KeySourceOptions } from './auth/key-source.js';
import { tokenRevocation } from './auth/principal.js';
import { createTokenVerifier } from './auth/verify-token.js';
import { type Phase, createAdminApp } from './planes/admin/admin-app.js';
import { type FillCoordinator, LOCAL_COORDINATOR, createRedisCoordinator } from './cache/coordinator.js';
import { L1Cache } from './cache/l1.js';
import { createMemoryStore } from './cache/memory-store.js';
import { CachePolicies } from './cache/policy.js';
import { type ReadService, createReadService } from './cache/read-service.js';
import { type RedisSettings, RedisHealth, type SharedRedis, connectRedis, isSharedRedis } from './platform/redis.js';
import { createRedisStore } from './cache/redis-store.js';
import { type PurgeBus, createLocalPurgeBus, createRedisPurgeBus } from './cache/purge-bus.js';
import { type OperatorControl, createOperatorControl } from './control/operator-control.js';
import type { CacheStore } from './cache/store.js';
import type { FileConfig } from './config/schema.js';
import { ShuttingDownError, messageOf } from './errors/proxy-error.js';
import { createDataPlane } from './planes/data/data-plane.js';
import { createFallbackApp } from './planes/fallback-app.js';
import { createHttpServer } from './http/server.js';
import { closeServer, listenOn } from './http/listen.js';
import { writeProblem } from './http/problem.js';
import { requestIdOf } from './http/request-id.js';
import { CircuitBreaker } from './limits/circuit-breaker.js';
import { createInboundLimiter } from './limits/inbound.js';
import { BUDGET_MODES } from './limits/budget-mode.js';
import { createUpstreamBudget } from './limits/upstream-budget.js';
import { createUpstreamPause } from './limits/upstream-pause.js';
import { createHttpLog } from './http/http-log.js';
import { createRequestLog, errorFields } from './observability/logger.js';
import { type CacheFootprint, createMetrics } from './observability/metrics.js';
import type { Tracing } from './observability/tracing.js';
import { countReplicas } from './platform/replica-count.js';
import { watchRedisDowntime } from './platform/redis-downtime.js';
import { registerSecret } from './observability/secrets.js';
import { createUpstreamClient } from './upstream/client.js';
import { createUpstreamOrigin } from './upstream/fetch-read.js';
import { guardOrigin } from './upstream/guarded-fetch.js';
import { type Passthrough, createPassthrough } from './upstream/passthrough.js';

export type { RedisSettings };

export interface ProxyAppOptions {
  readonly upstreamUrl: string;
  readonly keys: KeySourceOptions;
  readonly issuer?: string | undefined;
  readonly audience?: string | undefined;
  readonly config: FileConfig;
  readonly logger: Logger;
  /** Without it the cache is in-process (one replica). */
  readonly redis?: RedisSettings | undefined;
  /** Enables the operator API on the admin port (`ADMIN_TOKEN`). */
  readonly adminToken?: string | undefined;
  readonly now?: () => number;
  /** Each background refresh (stale-while-revalidate), settled when it is done. */
  readonly onBackgroundRefresh?: (settled: Promise<void>) => void;
  /** Node's process metrics on `/metrics` (default on). */
  readonly processMetrics?: boolean;
  /**
   * OpenTelemetry spans for the data plane (docs/operations.md#tracing), made by src/observability/
   * tracing-sdk.ts when an OTLP endpoint is configured; `undefined`: tracing is off.
   */
  readonly tracing?: Tracing | undefined;
}

export interface ListenOptions {
  readonly port: number;
  readonly host: string;
  /** Omit to run without the admin plane (tests of the data plane alone). */
  readonly adminPort?: number;
  /** Told as soon as the admin port listens, before the start is over. */
  readonly onAdminListening?: (port: number) => void;
}

export interface ProxyApp {
  readonly server: Server;
  readonly adminServer: Server;
  /** The operator state: TTL overrides, revocations and blocks. */
  readonly control: OperatorControl;
  readonly lists: AccessLists;
  readonly policies: CachePolicies;
  readonly store: CacheStore;
  readonly reads: ReadService;
  listen(options: ListenOptions): Promise<{ port: number; adminPort: number | undefined }>;
  /**
   * A re-read config file (`SIGHUP`): applies the cache policies at once, and returns the settings
   * that differ but only take effect on a restart (ports, Redis, limits, upstream, auth).
   */
  reload(file: FileConfig): string[];
  /**
   * Shuts down: `/readyz` turns 503 `draining` at once; the client port keeps serving for
   * `delayMs` (default 0) so that load balancers see the replica leave before it stops accepting;
   * then it drains (in-flight requests end within `drainMs`, default 10 s) and closes everything.
   */
  close(options?: { readonly drainMs?: number; readonly delayMs?: number }): Promise<void>;
}

/**
 * What a running replica applies from a re-read config file (`SIGHUP`); every other difference is
 * reported as needing a restart. Listed this way round so that a new setting is restart-only until
 * someone makes it reloadable on purpose (issue 10).
 */
const RELOADABLE = [
  'cache.partition',
  'cache.defaults',
  'cache.resources',
  'upstream.maxConcurrent',
  'upstream.maxPerSecond',
] as const;

/** Dotted paths of the leaves where two config documents differ. */
function changedPaths(before: unknown, after: unknown, path = ''): string[] {
  const isRecord = (value: unknown): value is Record<string, unknown> =>
    typeof value === 'object' && value !== null && !Array.isArray(value);
  if (!isRecord(before) || !isRecord(after)) return JSON.stringify(before) === JSON.stringify(after) ? [] : [path];
  const keys = new Set([...Object.keys(before), ...Object.keys(after)]);
  return [...keys].flatMap((key) => changedPaths(before[key], after[key], path === '' ? key : `${path}.${key}`));
}

function refuseWhileDraining(req: IncomingMessage, res: ServerResponse): void {
  // Closes the connection after this answer, so the client's next request opens one elsewhere.
  res.shouldKeepAlive = false;
  writeProblem(res, new ShuttingDownError(), requestIdOf(req), { head: req.method === 'HEAD' });
}

/** How long a start waits for Redis before serving degraded (misses go to the upstream). */
const REDIS_START_WAIT_MS = 3_000;

/** The cache's parts: in process for one replica, or shared through Redis. */
interface CacheParts {
  readonly store: CacheStore;
  readonly l1: L1Cache | undefined;
  readonly coordinator: FillCoordinator;
  readonly purges: PurgeBus;
  /** What the in-process tiers hold (the L1 in front of Redis, or the single replica's store). */
  readonly footprint: () => readonly CacheFootprint[];
}

function createCacheParts(
  config: FileConfig,
  redis: SharedRedis | undefined,
  health: RedisHealth | undefined,
  now: () => number,
  logger: Logger,
): CacheParts {
  if (redis === undefined || health === undefined) {
    const store = createMemoryStore({ maxBytes: config.cache.memory.maxBytes, now });
    return {
      store,
      l1: undefined,
      coordinator: LOCAL_COORDINATOR,
      purges: createLocalPurgeBus(),
      footprint: () => (store.footprint === undefined ? [] : [{ tier: 'memory', ...store.footprint() }]),
    };
  }
  const { client, subscriber } = redis;
  const prefix = config.cache.keyPrefix;
  const l1 = new L1Cache({ maxBytes: config.cache.l1.maxBytes, ttlMs: config.cache.l1.ttl * 1000 });
  return {
    store: createRedisStore({
      client,
      health,
      prefix,
      now,
      onFailure: (operation) => logger.debug({ operation }, 'redis store operation failed'),
    }),
    l1,
    coordinator: createRedisCoordinator({
      client,
      subscriber,
      health,
      channel: `${prefix}:fills`,
      // A leader's lease outlives its longest upstream exchange; only a dead leader's expires.
      leaseMs: config.upstream.timeout * 1000 + 2_000,
    }),
    purges: createRedisPurgeBus({
      client,
      subscriber,
      channel: `${prefix}:purge`,
      onError: (error) => logger.debug(errorFields(error), 'purge announcement failed'),
    }),
    footprint: () => [{ tier: 'l1', ...l1.footprint() }],
  };
}

/**
 * Builds every part, in the order a request meets them (docs/architecture.md#the-request-flow):
 * the shared infrastructure (metrics, Redis, the operator state), then authentication, the inbound
 * limits, authorisation, the cache with the origin it fetches through (the upstream, behind its
 * guard), and the planes on top.
 */
export async function createProxyApp(options: ProxyAppOptions): Promise<ProxyApp> {
  const { config, logger } = options;
  /** The one clock every part that reads the time is given. */
  const now = options.now ?? Date.now;
  // No log line may hold the admin token, wherever a client puts it (docs/operations.md#logs).
  if (options.adminToken !== undefined) registerSecret(options.adminToken);

  // ── shared infrastructure ──
  // Read on each scrape only, once everything below exists.
  const shared = isSharedRedis(options.redis);
  const metrics = createMetrics({
    circuitState: () => breaker.state,
    redisUp: shared ? () => cacheHealth?.state() !== 'down' : undefined,
    ...(options.processMetrics === false && { processMetrics: false }),
    inFlightRequests: () => inFlight,
    cacheFootprint: () => cache.footprint(),
    redisDownSeconds: shared ? () => redisDownSeconds?.() ?? 0 : undefined,
    operatorStateAgeSeconds: shared ? () => (control.status().ageMs ?? 0) / 1000 : undefined,
    budgetMode: { modes: BUDGET_MODES, current: () => budget.mode() },
  });
  const redis = isSharedRedis(options.redis)
    ? connectRedis(options.redis, {
        commandTimeoutMs: config.redis.commandTimeoutMs,
        onError: (component, error) => {
          metrics.redisError(component);
          logger.debug({ ...errorFields(error), component }, 'redis connection error');
        },
      })
    : undefined;
  // The cache's breaker; the inbound limits have their own, so a slow limit decision never makes
  // the cache skip Redis as well.
  const cacheHealth =
    redis === undefined
      ? undefined
      : new RedisHealth(redis.client, { now, onFailure: () => metrics.redisError('cache') });
  const redisDownSeconds = redis === undefined ? undefined : watchRedisDowntime(redis.client, now);
  // The replicas sharing Redis, counted through it: each one's local share while Redis is unusable.
  const replicaCount =
    redis === undefined
      ? undefined
      : countReplicas({
          client: redis.client,
          prefix: config.cache.keyPrefix,
          now,
          onError: (error) => logger.debug(errorFields(error), 'replicas not counted'),
        });
  const liveReplicas = replicaCount === undefined ? undefined : () => replicaCount.current();
  const control = createOperatorControl({
    syncIntervalMs: config.control.syncInterval * 1000,
    now,
    ...(redis !== undefined && { redis: { ...redis.control, prefix: config.cache.keyPrefix } }),
    onError: (error) => {
      metrics.redisError('control');
      logger.warn(errorFields(error), 'operator state not confirmed with Redis');
    },
  });

  // ── authenticate: a verified token, not revoked ──
  // Unread since the start: refused, unless the operator chose to serve (docs/scaling-out.md#the-operator-state-and-what-survives-what).
  const lists = accessListsOver(
    control.state,
    now,
    config.control.unconfirmed === 'serve' ? () => true : () => control.confirmed,
  );
  const verifier = createTokenVerifier({
    keys: options.keys,
    issuer: options.issuer,
    audience: options.audience,
    clockToleranceSeconds: config.auth.clockTolerance,
    claims: config.auth.claims,
    now,
  });
  const authenticator = createAuthenticator(verifier, lists);

  // ── inbound limits ──
  const limiter = createInboundLimiter({
    perCredential: config.rateLimit.perCredential,
    perCompany: config.rateLimit.perCompany,
    replicas: config.rateLimit.replicas,
    liveReplicas,
    redis:
      redis === undefined
        ? undefined
        : {
            client: redis.client,
            health: new RedisHealth(redis.client, { now, onFailure: () => metrics.redisError('limits') }),
            prefix: config.cache.keyPrefix,
            timeoutMs: config.redis.commandTimeoutMs,
          },
    now,
  });

  // ── authorise ──
  const authorization = { requiredScope: config.auth.requiredScope, requiredModule: config.auth.requiredModule };

  // ── the cache, and the origin it fetches through: the upstream behind its guard ──
  const policies = new CachePolicies(config.cache, control.overrides());
  control.onOverridesChange((overrides) => policies.setOverrides(overrides));
  const cache = createCacheParts(config, redis, cacheHealth, now, logger);
  const upstream = createUpstreamClient({
    url: options.upstreamUrl,
    timeoutMs: config.upstream.timeout * 1000,
    maxBodyBytes: config.upstream.maxBodyBytes,
    connections: config.upstream.maxConcurrent,
  });
  const breaker = new CircuitBreaker({
    failures: config.upstream.breaker.failures,
    openForMs: config.upstream.breaker.openFor * 1000,
    now,
    onChange: (state) => logger.warn({ breaker: state }, 'upstream circuit breaker'),
  });
  const pause = createUpstreamPause({
    redis:
      redis === undefined || cacheHealth === undefined
        ? undefined
        : { client: redis.client, health: cacheHealth, prefix: config.cache.keyPrefix },
    probeMs: config.upstream.timeout * 1000 + 1_000,
    now,
  });
  const budget = createUpstreamBudget({
    maxConcurrent: config.upstream.maxConcurrent,
    maxPerSecond: config.upstream.maxPerSecond,
    replicas: config.rateLimit.replicas,
    liveReplicas,
    holdMs: config.upstream.timeout * 1000,
    cutOff: config.upstream.budgetCutOff,
    redis: redis === undefined ? undefined : { ...redis.budget, prefix: config.cache.keyPrefix },
    now,
    onRedisFailure: (error) => {
      metrics.redisError('budget');
      logger.debug(errorFields(error), 'upstream budget: the shared ledger did not answer');
    },
  });
  const origin = guardOrigin(createUpstreamOrigin(upstream), {
    // An upstream 401 for a token the proxy accepted revokes it in the proxy too
    // (docs/credentials.md).
    onUpstreamUnauthorized: ({ principal }) => {
      const { kind, value } = tokenRevocation(principal);
      void control.revoke(kind, value, principal.expiresAt).then((sharedNow) => {
        if (!sharedNow) logger.warn('an upstream-refused token is revoked on this replica only: Redis is unavailable');
      });
    },
    breaker,
    pause,
    budget,
    maxQueueWaitMs: config.upstream.maxQueueWait * 1000,
    metrics,
    now,
  });
  const reads = createReadService({
    store: cache.store,
    l1: cache.l1,
    coordinator: cache.coordinator,
    policies,
    keyPrefix: config.cache.keyPrefix,
    fetch: origin,
    // A follower waits about as long as the leader's upstream exchange may take.
    coalesceWaitMs: config.upstream.timeout * 1000 + 1_000,
    metrics,
    purges: cache.purges,
    refreshAhead: config.cache.refresh.ahead,
    maxBackgroundRefreshes: config.cache.refresh.maxConcurrent,
    now,
    ...(options.onBackgroundRefresh !== undefined && { onBackgroundRefresh: options.onBackgroundRefresh }),
  });
  const passthrough: Passthrough | undefined = config.upstream.passthrough
    ? createPassthrough({
        url: options.upstreamUrl,
        timeoutMs: config.upstream.timeout * 1000,
        maxSockets: config.upstream.maxConcurrent,
      })
    : undefined;

  // ── the planes ──
  const requestLog = createRequestLog(logger);
  const dataPlane = createDataPlane({
    authenticator,
    limiter,
    lists,
    policy: authorization,
    reads,
    log: requestLog,
    metrics,
    yieldUnknownResources: passthrough !== undefined,
    tracing: options.tracing,
    // The message and the stack's first frames: a library error may carry a payload or a key.
    onDefect: (error) =>
      logger.error(
        {
          err: {
            message: messageOf(error),
            stack: error instanceof Error ? error.stack?.split('\n').slice(0, 4).join('\n') : undefined,
          },
        },
        'defect',
      ),
  });
  // One request-log middleware for both Express planes.
  const httpLog = createHttpLog(logger);
  const fallback = createFallbackApp(passthrough?.handler, httpLog);
  const serverLogs = { httpLog, requestLog };
  /** Starting until both ports listen; draining from the first step of `close` (docs/operations.md#reload-start-and-shutdown). */
  let phase: Phase = 'starting';
  /** Set by `close` before its delay: readiness fails while the client port still serves. */
  let leaving = false;
  /** Requests on the client port not yet answered (or abandoned): a response closes exactly once. */
  let inFlight = 0;
  const requestClosed = (): void => {
    inFlight -= 1;
  };
  const server = createHttpServer(
    function handleRequest(req, res) {
      inFlight += 1;
      res.on('close', requestClosed);
      // The listener is closed while draining; a request on a kept-alive connection still arrives.
      if (phase === 'draining') return refuseWhileDraining(req, res);
      if (!dataPlane(req, res)) fallback(req, res);
    },
    serverLogs,
    { keepAliveTimeout: 65_000, requestTimeout: 60_000 },
  );

  let currentConfig = config;
  const adminServer = createHttpServer(
    createAdminApp({
      readiness: {
        phase() {
          if (leaving) return 'draining';
          if (phase === 'ready' && !lists.areKnown()) return 'unconfirmed';
          // Opt-in (control.maxStaleness): a replica that cannot confirm its operator state leaves
          // the load balancer to the replicas that can (docs/scaling-out.md#the-operator-state-and-what-survives-what).
          const { ageMs } = control.status();
          const maxStaleness = currentConfig.control.maxStaleness;
          return phase === 'ready' && maxStaleness > 0 && ageMs !== undefined && ageMs > maxStaleness * 1000
            ? 'stale'
            : phase;
        },
        components() {
          const status = control.status();
          return {
            upstream: breaker.state === 'closed' ? 'ok' : `breaker ${breaker.state}`,
            // Where upstream slots come from (src/limits/budget-mode.ts).
            upstream_budget: budget.mode(),
            cache: cache.store.kind,
            redis: cacheHealth?.state() ?? 'none',
            // Each replica's share while Redis is unusable is 1 / this.
            replicas: replicaCount?.current() ?? config.rateLimit.replicas,
            operator_state: {
              shared: status.shared,
              confirmed: status.confirmed,
              entries: status.entries,
              ...(status.ageMs !== undefined && { age_seconds: Math.floor(status.ageMs / 1000) }),
            },
          };
        },
      },
      metrics,
      log: httpLog,
      operator:
        options.adminToken === undefined
          ? undefined
          : {
              token: options.adminToken,
              config: () => currentConfig,
              policies,
              reads,
              control,
              now,
            },
    }),
    serverLogs,
  );

  return {
    server,
    adminServer,
    control,
    lists,
    policies,
    store: cache.store,
    reads,
    async listen(listen) {
      // The admin port first: an orchestrator's readiness probe sees 503 `starting`, not nothing,
      // while the start waits (boundedly) for Redis and reads the shared operator state.
      const adminPort =
        listen.adminPort === undefined ? undefined : await listenOn(adminServer, listen.adminPort, listen.host);
      if (adminPort !== undefined) listen.onAdminListening?.(adminPort);
      const startedWaiting = performance.now();
      await redis?.ready(REDIS_START_WAIT_MS);
      await control.sync();
      // The upstream budget's shared ledger answering before any request, so that the first misses
      // do not wait for it (a replica cut off from it starts nothing until it may take its share:
      // src/limits/budget-mode.ts). Within the same bound as the wait for Redis.
      await budget.whenShared(REDIS_START_WAIT_MS - (performance.now() - startedWaiting));
      const port = await listenOn(server, listen.port, listen.host);
      phase = 'ready';
      return { port, adminPort };
    },
    reload(file) {
      const changed = changedPaths(currentConfig, file);
      // The cache policies (run-time overrides stay on top), and the upstream budget's limits for
      // this replica's calls (every replica reloads the same file: docs/limits.md#the-upstream-budget).
      policies.setConfig(file.cache);
      if (
        file.upstream.maxConcurrent !== currentConfig.upstream.maxConcurrent ||
        file.upstream.maxPerSecond !== currentConfig.upstream.maxPerSecond
      ) {
        budget.apply({ maxConcurrent: file.upstream.maxConcurrent, maxPerSecond: file.upstream.maxPerSecond });
      }
      currentConfig = file;
      return changed.filter(
        (path) => !RELOADABLE.some((reloadable) => path === reloadable || path.startsWith(`${reloadable}.`)),
      );
    },
    async close(closeOptions = {}) {
      // Readiness fails first; the API port serves on through the delay (the load balancer's
      // time to notice), then stops accepting and its in-flight requests end (or are cut at the
      // bound); the admin port goes last, so `/readyz` answers 503 meanwhile.
      leaving = true;
      const delayMs = closeOptions.delayMs ?? 0;
      if (delayMs > 0) {
        logger.info({ delayMs }, 'readiness off; serving until the drain');
        await new Promise((resolve) => setTimeout(resolve, delayMs));
      }
      logger.info({ drainMs: closeOptions.drainMs }, 'draining');
      phase = 'draining';
      await closeServer(server, closeOptions.drainMs);
      await closeServer(adminServer, 1_000);
      passthrough?.close();
      verifier.close();
      control.close();
      await replicaCount?.close();
      budget.close();
      await cache.coordinator.close();
      await cache.store.close();
      redis?.close();
      await upstream.close();
    },
  };
}
