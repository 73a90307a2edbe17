/**
 * The two ports: the data plane with the Express fallback behind it on the client port, and the
 * admin plane on its own (health, readiness, metrics and, with `ADMIN_TOKEN` or the change feed's
 * tokens, the operator API).
 * One request-log middleware serves both Express planes.
 */
import type { Server } from 'node:http';
import { messageOf } from '../errors/proxy-error.js';
import { createHttpLog } from '../http/http-log.js';
import { createHttpServer } from '../http/server.js';
import { createRequestLog, type RequestLog } from '../observability/logger.js';
import { createAdminApp, type OperatorApi } from '../planes/admin/admin-app.js';
import { createDataPlane, type DataPlaneOptions } from '../planes/data/data-plane.js';
import { createFallbackApp } from '../planes/fallback-app.js';
import { TokenBucket } from '../platform/token-bucket.js';
import { readinessOf } from './readiness.js';
import type { ReplicaParts } from './replica-parts.js';

export interface Servers {
  readonly server: Server;
  readonly adminServer: Server;
  /** What the client port's data plane runs on (a benchmark of its steps times these same parts). */
  readonly dataPlane: DataPlaneOptions;
}

type HttpLog = ReturnType<typeof createHttpLog>;

export function wireServers(wired: ReplicaParts): Servers {
  const requestLog = createRequestLog(wired.foundation.logger);
  const httpLog = createHttpLog(wired.foundation.logger);
  const dataPlane = dataPlaneOptions(wired, requestLog);
  return {
    server: clientServer(wired, dataPlane, httpLog, requestLog),
    adminServer: adminServer(wired, httpLog, requestLog),
    dataPlane,
  };
}

function dataPlaneOptions(
  { foundation, credentials, upstream, reads }: ReplicaParts,
  requestLog: RequestLog,
): DataPlaneOptions {
  const { options, config, logger, metrics } = foundation;
  return {
    authenticator: credentials.authenticator,
    limiter: credentials.limiter,
    lists: credentials.lists,
    policy: { requiredScope: config.auth.requiredScope, requiredModule: config.auth.requiredModule },
    reads: reads.reads,
    log: requestLog,
    metrics,
    yieldUnknownResources: upstream.passthrough !== undefined,
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
  };
}

function clientServer(
  { lifecycle, upstream }: ReplicaParts,
  dataPlaneOptions: DataPlaneOptions,
  httpLog: HttpLog,
  requestLog: RequestLog,
): Server {
  const dataPlane = createDataPlane(dataPlaneOptions);
  const fallback = createFallbackApp(upstream.passthrough?.handler, httpLog);
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

function adminServer(wired: ReplicaParts, httpLog: HttpLog, requestLog: RequestLog): Server {
  const { foundation, lifecycle, configInForce, shared, control, credentials, upstream, reads } = wired;
  const { config, metrics } = foundation;
  return createHttpServer(
    createAdminApp({
      readiness: readinessOf({
        lifecycle,
        lists: credentials.lists,
        control,
        config: configInForce,
        breaker: upstream.breaker,
        budget: upstream.budget,
        store: reads.cache.store,
        cacheHealth: shared.cacheHealth,
        replicas: () => shared.replicaCount?.current() ?? config.rateLimit.replicas,
      }),
      metrics,
      log: httpLog,
      operator: operatorApi(wired),
    }),
    { httpLog, requestLog },
  );
}

/** The operator API, with the admin token or the change feed's tokens; undefined with neither. */
function operatorApi({
  foundation,
  access,
  configInForce,
  control,
  upstream,
  reads,
}: ReplicaParts): OperatorApi | undefined {
  if (!access.enabled) return undefined;
  const { config, metrics, now } = foundation;
  const { changesPerSecond, burst } = config.cache.invalidation;
  return {
    credentials: access.credentials,
    // Per replica; a restart applies new settings, as for every setting config-in-force.ts does not list.
    invalidationLimit: { bucket: new TokenBucket({ perSecond: changesPerSecond, burst }, now), metrics },
    config: () => configInForce.current,
    policies: reads.policies,
    reads: reads.reads,
    control,
    budget: upstream.budget,
    metrics,
    cacheBytes: reads.cache.bytesByCompany,
    freshness: reads.freshness,
    now,
  };
}
