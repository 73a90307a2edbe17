/**
 * A running proxy, part by part, in the order a request meets them (docs/architecture.md#the-request-flow):
 * the shared infrastructure (metrics, Redis, the operator state), then authentication and the
 * inbound limits, the upstream behind its guard, the cache that fetches through it, and the two
 * ports on top; then the lifecycle (start, reload, drain). Each part is built by its own function
 * in src/wiring/ and registers its own close as it is built; the shutdown closes them in reverse.
 */
import type { Server } from 'node:http';
import type { AccessLists } from './auth/access-lists.js';
import type { CachePolicies } from './cache/read/policy.js';
import type { ReadService } from './cache/read/read-service.js';
import type { CacheStore } from './cache/stores/store.js';
import type { FileConfig } from './config/schema.js';
import type { OperatorControl } from './control/operator-control.js';
import { createMetrics } from './observability/metrics.js';
import { registerSecret } from './observability/secrets.js';
import type { FeedReread } from './planes/admin/feed-credentials.js';
import type { DataPlaneOptions } from './planes/data/data-plane.js';
import type { RedisSettings } from './platform/redis/connection.js';
import { Closers } from './wiring/closers.js';
import { ConfigInForce } from './wiring/config-in-force.js';
import { wireControl } from './wiring/control.js';
import { wireCredentials } from './wiring/credentials.js';
import type { Foundation, ProxyAppOptions } from './wiring/foundation.js';
import { ReplicaLifecycle } from './wiring/lifecycle.js';
import { observeParts } from './wiring/observed.js';
import { wireOperatorAccess } from './wiring/operator-access.js';
import { wireReads } from './wiring/reads.js';
import type { ReplicaParts } from './wiring/replica-parts.js';
import { wireServers } from './wiring/servers.js';
import { type CloseOptions, type ListenOptions, startServing, stopServing } from './wiring/serving.js';
import { wireShared } from './wiring/shared.js';
import { wireUpstream } from './wiring/upstream.js';

export type { ListenOptions, ProxyAppOptions, RedisSettings };

export interface ProxyApp {
  readonly server: Server;
  readonly adminServer: Server;
  /** The operator state: TTL overrides, revocations, blocks and company weights. */
  readonly control: OperatorControl;
  readonly lists: AccessLists;
  readonly policies: CachePolicies;
  readonly store: CacheStore;
  readonly reads: ReadService;
  /** Every part the replica holds, by owner (src/wiring/replica-parts.ts). */
  readonly parts: ReplicaParts;
  /** What the client port's data plane runs on. */
  readonly dataPlane: DataPlaneOptions;
  listen(options: ListenOptions): Promise<{ port: number; adminPort: number | undefined }>;
  /**
   * A re-read config file (`SIGHUP`): applies the cache policies at once, and returns the settings
   * that differ but only take effect on a restart (ports, Redis, limits, upstream, auth).
   */
  reload(file: FileConfig): string[];
  /**
   * Reads `INVALIDATE_TOKEN_FILE` again (`SIGHUP`, beside the config file): its tokens are the
   * change feed's from then on; an unreadable or empty file keeps those in force.
   */
  rereadInvalidateTokens(): Promise<FeedReread>;
  /**
   * Shuts down: `/readyz` turns 503 `draining` at once; the client port keeps serving for
   * `delayMs` (default 0) so that load balancers see the replica leave before it stops accepting;
   * then it drains (in-flight requests end within `drainMs`, default 10 s) and closes everything.
   */
  close(options?: CloseOptions): Promise<void>;
}

export async function createProxyApp(options: ProxyAppOptions): Promise<ProxyApp> {
  // No log line may hold the admin token or the change feed's, wherever a client puts it
  // (docs/operations.md#logs); the feed's file tokens are registered as they are read.
  if (options.adminToken !== undefined) registerSecret(options.adminToken);
  if (options.invalidateToken !== undefined) registerSecret(options.invalidateToken);
  const foundation: Foundation = {
    options,
    config: options.config,
    logger: options.logger,
    now: options.now ?? Date.now,
    metrics: createMetrics(options.processMetrics === false ? { processMetrics: false } : {}),
    closers: new Closers(),
  };
  // First: a token file that cannot be read stops the start before a connection is made.
  const access = wireOperatorAccess(foundation);
  const lifecycle = new ReplicaLifecycle();
  const configInForce = new ConfigInForce(options.config);
  const shared = wireShared(foundation);
  const control = wireControl(foundation, shared);
  const credentials = wireCredentials(foundation, shared, control);
  const upstream = wireUpstream(foundation, shared, control, configInForce);
  const reads = wireReads(foundation, shared, control, configInForce, upstream.origin);
  const wired: ReplicaParts = {
    foundation,
    access,
    lifecycle,
    configInForce,
    shared,
    control,
    credentials,
    upstream,
    reads,
  };
  observeParts(wired);
  const servers = wireServers(wired);
  return {
    ...servers,
    control,
    lists: credentials.lists,
    policies: reads.policies,
    store: reads.cache.store,
    reads: reads.reads,
    parts: wired,
    listen: (listen) => startServing(wired, servers, listen),
    reload: (file) => configInForce.reload(file),
    rereadInvalidateTokens: () => access.feed?.reread() ?? Promise.resolve('unchanged'),
    close: (closeOptions = {}) => stopServing(wired, servers, closeOptions),
  };
}
