/**
 * The one place where the proxy is wired, in the order of the request flow (docs/architecture.md#the-request-flow):
 * data plane (canonicalise → authenticate → authorise → validate) → read service (L1 → store →
 * coalesced fill) → upstream; then the Express fallback plane, and the admin plane on its own port.
 */
import type { Server } from 'node:http';
import type { Logger } from 'pino';
import { type AccessLists, accessListsOver } from './auth/access-lists.js';
import { createAuthenticator } from './auth/authenticate.js';
import type { KeySourceOptions } from './auth/key-source.js';
import { tokenRevocation } from './auth/principal.js';
import { createTokenVerifier } from './auth/verify-token.js';
import type { Origin } from './cache/origin.js';
import { CachePolicies } from './cache/policy.js';
import { createReadService, type ReadService } from './cache/read-service.js';
import type { CacheStore } from './cache/store.js';
import type { FileConfig } from './config/schema.js';
import { createOperatorControl, type OperatorControl } from './control/operator-control.js';
import { messageOf } from './errors/proxy-error.js';
import { createHttpLog } from './http/http-log.js';
import { closeServer, listenOn } from './http/listen.js';
import { createHttpServer } from './http/server.js';
import { BUDGET_MODES } from './limits/budget-mode.js';
import { CircuitBreaker } from './limits/circuit-breaker.js';
import { createInboundLimiter } from './limits/inbound.js';
import { createUpstreamBudget } from './limits/upstream-budget.js';
import { createUpstreamPause } from './limits/upstream-pause.js';
import { createRequestLog, errorFields, type RequestLog } from './observability/logger.js';
import { createMetrics, type Metrics } from './observability/metrics.js';
import { registerSecret } from './observability/secrets.js';
import type { Tracing } from './observability/tracing.js';
import { createAdminApp } from './planes/admin/admin-app.js';
import { createDataPlane } from './planes/data/data-plane.js';
import { createFallbackApp } from './planes/fallback-app.js';
import { type EvictionSetting, watchEvictionPolicy } from './platform/eviction-policy.js';
import { connectRedis, isSharedRedis, RedisHealth, type RedisSettings, type SharedRedis } from './platform/redis.js';
import { watchRedisDowntime } from './platform/redis-downtime.js';
import { countReplicas, type ReplicaCount } from './platform/replica-count.js';
import { createUpstreamClient } from './upstream/client.js';
import { createUpstreamOrigin } from './upstream/fetch-read.js';
import { guardOrigin } from './upstream/guarded-fetch.js';
import { createPassthrough, type Passthrough } from './upstream/passthrough.js';
import { createCacheParts } from './wiring/cache-parts.js';
import { ConfigInForce } from './wiring/config-in-force.js';
import { ReplicaLifecycle } from './wiring/lifecycle.js';
import { readinessOf } from './wiring/readiness.js';

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

/** How long a start waits for Redis before serving degraded (misses go to the upstream). */
const REDIS_START_WAIT_MS = 3_000;

/** What every part is built from: the options, the one clock, the metrics and the logger. */
interface Base {
  readonly options: ProxyAppOptions;
  readonly config: FileConfig;
  readonly logger: Logger;
  /** The one clock every part that reads the time is given. */
  readonly now: () => number;
  readonly metrics: Metrics;
}

/** Redis and what is counted through it; all `undefined` for a single replica without Redis. */
interface Shared {
  readonly redis: SharedRedis | undefined;
  /** The cache's breaker; the inbound limits have their own, so a slow limit decision never makes the cache skip Redis as well. */
  readonly cacheHealth: RedisHealth | undefined;
  readonly redisDownSeconds: (() => number) | undefined;
  readonly replicaCount: ReplicaCount | undefined;
  /** The replicas sharing Redis, counted through it: each one's local share while Redis is unusable. */
  readonly liveReplicas: (() => number | undefined) | undefined;
}

function connectShared({ options, config, logger, now, metrics }: Base): Shared {
  const redis = isSharedRedis(options.redis)
    ? connectRedis(options.redis, {
        commandTimeoutMs: config.redis.commandTimeoutMs,
        onError: (component, error) => {
          metrics.redisError(component);
          logger.debug({ ...errorFields(error), component }, 'redis connection error');
        },
      })
    : undefined;
  if (redis === undefined)
    return {
      redis,
      cacheHealth: undefined,
      redisDownSeconds: undefined,
      replicaCount: undefined,
      liveReplicas: undefined,
    };
  // The operator state lives in the cache's Redis unless it has one of its own.
  const controlApart = options.redis?.controlUrl !== undefined;
  const reportEviction = (setting: EvictionSetting, problem: string | undefined): void => {
    const fields = { redisNode: setting.node, maxmemoryPolicy: setting.policy, maxmemory: setting.maxmemory };
    if (problem === undefined) logger.info(fields, 'redis eviction policy');
    else logger.warn(fields, problem);
  };
  watchEvictionPolicy(redis.client, { pages: true, operatorState: !controlApart }, reportEviction);
  if (controlApart) watchEvictionPolicy(redis.control.client, { pages: false, operatorState: true }, reportEviction);
  const replicaCount = countReplicas({
    client: redis.client,
    prefix: config.cache.keyPrefix,
    now,
    onError: (error) => logger.debug(errorFields(error), 'replicas not counted'),
  });
  return {
    redis,
    cacheHealth: new RedisHealth(redis.client, { now, onFailure: () => metrics.redisError('cache') }),
    redisDownSeconds: watchRedisDowntime(redis.client, now),
    replicaCount,
    liveReplicas: () => replicaCount.current(),
  };
}

function createControl({ config, logger, now, metrics }: Base, { redis }: Shared): OperatorControl {
  return createOperatorControl({
    syncIntervalMs: config.control.syncInterval * 1000,
    now,
    ...(redis !== undefined && { redis: { ...redis.control, prefix: config.cache.keyPrefix } }),
    onError: (error) => {
      metrics.redisError('control');
      logger.warn(errorFields(error), 'operator state not confirmed with Redis');
    },
  });
}

/** Authentication: a verified token, not revoked; and the inbound limits that follow it. */
function wireCredentials({ options, config, now, metrics }: Base, shared: Shared, control: OperatorControl) {
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
  const { redis } = shared;
  const limiter = createInboundLimiter({
    perCredential: config.rateLimit.perCredential,
    perCompany: config.rateLimit.perCompany,
    replicas: config.rateLimit.replicas,
    liveReplicas: shared.liveReplicas,
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
  return { lists, verifier, authenticator: createAuthenticator(verifier, lists), limiter };
}

/** The upstream behind its guard: the company's 429 pause, the circuit breaker, the budget. */
function wireUpstream(base: Base, shared: Shared, control: OperatorControl) {
  const { options, config, logger, now, metrics } = base;
  const { redis, cacheHealth } = shared;
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
    liveReplicas: shared.liveReplicas,
    holdMs: config.upstream.timeout * 1000,
    cutOff: config.upstream.budgetCutOff,
    companyWeights: config.upstream.companyWeights,
    redis: redis === undefined ? undefined : { ...redis.budget, prefix: config.cache.keyPrefix },
    now,
    onRedisFailure: (error) => {
      metrics.redisError('budget');
      logger.debug(errorFields(error), 'upstream budget: the shared ledger did not answer');
    },
  });
  const origin = guardOrigin(createUpstreamOrigin(upstream), {
    // An upstream 401 for a token the proxy accepted revokes it in the proxy too (docs/credentials.md).
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
  const passthrough: Passthrough | undefined = config.upstream.passthrough
    ? createPassthrough({
        url: options.upstreamUrl,
        timeoutMs: config.upstream.timeout * 1000,
        maxSockets: config.upstream.maxConcurrent,
      })
    : undefined;
  return { upstream, breaker, budget, origin, passthrough };
}

/** The cache, with the origin it fetches through, under the policies in force. */
function wireReads(base: Base, shared: Shared, control: OperatorControl, origin: Origin) {
  const { options, config, logger, now, metrics } = base;
  const policies = new CachePolicies(config.cache, control.overrides());
  control.onOverridesChange((overrides) => policies.setOverrides(overrides));
  const cache = createCacheParts(config, shared.redis, shared.cacheHealth, now, logger);
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
    prefetch: config.cache.prefetch,
    now,
    ...(options.onBackgroundRefresh !== undefined && { onBackgroundRefresh: options.onBackgroundRefresh }),
  });
  return { policies, cache, reads };
}

/** The data plane, with the Express fallback behind it, on the client port. */
function clientServer(
  { options, config, logger, metrics }: Base,
  parts: {
    readonly credentials: ReturnType<typeof wireCredentials>;
    readonly reads: ReadService;
    readonly passthrough: Passthrough | undefined;
    readonly lifecycle: ReplicaLifecycle;
    readonly httpLog: ReturnType<typeof createHttpLog>;
    readonly requestLog: RequestLog;
  },
): Server {
  const { credentials, lifecycle, httpLog, requestLog } = parts;
  const dataPlane = createDataPlane({
    authenticator: credentials.authenticator,
    limiter: credentials.limiter,
    lists: credentials.lists,
    policy: { requiredScope: config.auth.requiredScope, requiredModule: config.auth.requiredModule },
    reads: parts.reads,
    log: requestLog,
    metrics,
    yieldUnknownResources: parts.passthrough !== undefined,
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
  const fallback = createFallbackApp(parts.passthrough?.handler, httpLog);
  return createHttpServer(
    function handleRequest(req, res) {
      // The listener is closed while draining; a request on a kept-alive connection still arrives.
      if (!lifecycle.admit(req, res)) return;
      if (!dataPlane(req, res)) fallback(req, res);
    },
    { httpLog, requestLog },
    { keepAliveTimeout: 65_000, requestTimeout: 60_000 },
  );
}

/**
 * Builds every part, in the order a request meets them (docs/architecture.md#the-request-flow):
 * the shared infrastructure (metrics, Redis, the operator state), then authentication, the inbound
 * limits, authorisation, the cache with the origin it fetches through (the upstream, behind its
 * guard), and the planes on top; then the lifecycle (start, reload, drain).
 */
export async function createProxyApp(options: ProxyAppOptions): Promise<ProxyApp> {
  const { config, logger } = options;
  const now = options.now ?? Date.now;
  // No log line may hold the admin token, wherever a client puts it (docs/operations.md#logs).
  if (options.adminToken !== undefined) registerSecret(options.adminToken);
  const lifecycle = new ReplicaLifecycle();
  const configInForce = new ConfigInForce(config);
  // Read on each scrape only, once everything below exists.
  const redisShared = isSharedRedis(options.redis);
  const metrics = createMetrics({
    circuitState: () => upstream.breaker.state,
    redisUp: redisShared ? () => shared.cacheHealth?.state() !== 'down' : undefined,
    ...(options.processMetrics === false && { processMetrics: false }),
    inFlightRequests: () => lifecycle.inFlight,
    cacheFootprint: () => cached.cache.footprint(),
    redisDownSeconds: redisShared ? () => shared.redisDownSeconds?.() ?? 0 : undefined,
    operatorStateAgeSeconds: redisShared ? () => (control.status().ageMs ?? 0) / 1000 : undefined,
    budgetMode: { modes: BUDGET_MODES, current: () => upstream.budget.mode() },
    companyCacheBytes: () => cached.cache.bytesByCompany(),
  });
  const base: Base = { options, config, logger, now, metrics };
  const shared = connectShared(base);
  const control = createControl(base, shared);
  const credentials = wireCredentials(base, shared, control);
  const upstream = wireUpstream(base, shared, control);
  const cached = wireReads(base, shared, control, upstream.origin);
  // The re-read file's cache policies (run-time overrides stay on top), and the upstream budget's
  // limits for this replica's calls (every replica reloads the same file: docs/limits.md#the-upstream-budget).
  configInForce.onReload((file) => cached.policies.setConfig(file.cache));
  configInForce.onReload((file, before) => {
    if (
      file.upstream.maxConcurrent !== before.upstream.maxConcurrent ||
      file.upstream.maxPerSecond !== before.upstream.maxPerSecond
    )
      upstream.budget.apply({ maxConcurrent: file.upstream.maxConcurrent, maxPerSecond: file.upstream.maxPerSecond });
  });
  // Company weights in the budget's line: the file's, under the operator's run-time ones
  // (docs/limits.md#fair-shares), from the start, on every reload and on every change of either.
  const weighCompanies = (): void =>
    upstream.budget.weigh({ ...configInForce.current.upstream.companyWeights, ...control.weights() });
  weighCompanies();
  configInForce.onReload(weighCompanies);
  control.onWeightsChange(weighCompanies);

  // ── the planes ──
  const requestLog = createRequestLog(logger);
  // One request-log middleware for both Express planes.
  const httpLog = createHttpLog(logger);
  const server = clientServer(base, {
    credentials,
    reads: cached.reads,
    passthrough: upstream.passthrough,
    lifecycle,
    httpLog,
    requestLog,
  });
  const wired: Wired = { base, lifecycle, configInForce, shared, control, credentials, upstream, cached };
  const adminServer = adminPlaneServer(wired, httpLog, requestLog);
  const servers = { server, adminServer };

  return {
    server,
    adminServer,
    control,
    lists: credentials.lists,
    policies: cached.policies,
    store: cached.cache.store,
    reads: cached.reads,
    listen: (listen) => startServing(wired, servers, listen),
    reload: (file) => configInForce.reload(file),
    close: (closeOptions = {}) => stopServing(wired, servers, closeOptions),
  };
}

/** Every part a running replica holds, for the planes and the lifecycle. */
interface Wired {
  readonly base: Base;
  readonly lifecycle: ReplicaLifecycle;
  readonly configInForce: ConfigInForce;
  readonly shared: Shared;
  readonly control: OperatorControl;
  readonly credentials: ReturnType<typeof wireCredentials>;
  readonly upstream: ReturnType<typeof wireUpstream>;
  readonly cached: ReturnType<typeof wireReads>;
}

interface Servers {
  readonly server: Server;
  readonly adminServer: Server;
}

/** The admin plane on its own port: health, readiness, metrics and (with `ADMIN_TOKEN`) the operator API. */
function adminPlaneServer(wired: Wired, httpLog: ReturnType<typeof createHttpLog>, requestLog: RequestLog): Server {
  const { base, lifecycle, configInForce, shared, control, credentials, upstream, cached } = wired;
  const { options, config, metrics, now } = base;
  return createHttpServer(
    createAdminApp({
      readiness: readinessOf({
        lifecycle,
        lists: credentials.lists,
        control,
        config: configInForce,
        breaker: upstream.breaker,
        budget: upstream.budget,
        store: cached.cache.store,
        cacheHealth: shared.cacheHealth,
        replicas: () => shared.replicaCount?.current() ?? config.rateLimit.replicas,
      }),
      metrics,
      log: httpLog,
      operator:
        options.adminToken === undefined
          ? undefined
          : {
              token: options.adminToken,
              config: () => configInForce.current,
              policies: cached.policies,
              reads: cached.reads,
              control,
              budget: upstream.budget,
              metrics,
              cacheBytes: cached.cache.bytesByCompany,
              now,
            },
    }),
    { httpLog, requestLog },
  );
}

/**
 * The start: the admin port first, so that an orchestrator's readiness probe sees 503 `starting`,
 * not nothing, while the start waits (boundedly) for Redis and reads the shared operator state.
 */
async function startServing(
  { shared, control, upstream, lifecycle }: Wired,
  { server, adminServer }: Servers,
  listen: ListenOptions,
): Promise<{ port: number; adminPort: number | undefined }> {
  const adminPort =
    listen.adminPort === undefined ? undefined : await listenOn(adminServer, listen.adminPort, listen.host);
  if (adminPort !== undefined) listen.onAdminListening?.(adminPort);
  const startedWaiting = performance.now();
  await shared.redis?.ready(REDIS_START_WAIT_MS);
  await control.sync();
  // The upstream budget's shared ledger answering before any request, so that the first misses
  // do not wait for it (a replica cut off from it starts nothing until it may take its share:
  // src/limits/budget-mode.ts). Within the same bound as the wait for Redis.
  await upstream.budget.whenShared(REDIS_START_WAIT_MS - (performance.now() - startedWaiting));
  const port = await listenOn(server, listen.port, listen.host);
  lifecycle.markReady();
  return { port, adminPort };
}

/**
 * The shutdown: readiness fails first; the API port serves on through the delay (the load
 * balancer's time to notice), then stops accepting and its in-flight requests end (or are cut at
 * the bound); the admin port goes last, so `/readyz` answers 503 meanwhile.
 */
async function stopServing(
  wired: Wired,
  { server, adminServer }: Servers,
  closeOptions: { readonly drainMs?: number; readonly delayMs?: number },
): Promise<void> {
  const { base, lifecycle, shared, control, credentials, upstream, cached } = wired;
  lifecycle.leave();
  const delayMs = closeOptions.delayMs ?? 0;
  if (delayMs > 0) {
    base.logger.info({ delayMs }, 'readiness off; serving until the drain');
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
  base.logger.info({ drainMs: closeOptions.drainMs }, 'draining');
  lifecycle.drain();
  await closeServer(server, closeOptions.drainMs);
  await closeServer(adminServer, 1_000);
  upstream.passthrough?.close();
  credentials.verifier.close();
  control.close();
  await shared.replicaCount?.close();
  upstream.budget.close();
  await cached.cache.coordinator.close();
  await cached.cache.store.close();
  shared.redis?.close();
  await upstream.upstream.close();
}
