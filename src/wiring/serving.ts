/**
 * A replica's start and shutdown (docs/operations.md#reload-start-and-shutdown), over the parts
 * wired and the two servers.
 */
import { closeServer, listenOn } from '../http/listen.js';
import { errorFields } from '../observability/logger.js';
import type { ReplicaParts } from './replica-parts.js';
import type { Servers } from './servers.js';

export interface ListenOptions {
  readonly port: number;
  readonly host: string;
  /** Omit to run without the admin plane (tests of the data plane alone). */
  readonly adminPort?: number;
  /** Told as soon as the admin port listens, before the start is over. */
  readonly onAdminListening?: (port: number) => void;
}

export interface CloseOptions {
  readonly drainMs?: number;
  readonly delayMs?: number;
}

/** How long a start waits for Redis before serving degraded (misses go to the upstream). */
const REDIS_START_WAIT_MS = 3_000;

/**
 * The start: the admin port first, so that an orchestrator's readiness probe sees 503 `starting`,
 * not nothing, while the start waits (boundedly) for Redis and reads the shared operator state.
 */
export async function startServing(
  { shared, control, upstream, lifecycle }: ReplicaParts,
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
  // src/upstream-guard/budget-mode.ts). Within the same bound as the wait for Redis.
  await upstream.budget.whenShared(REDIS_START_WAIT_MS - (performance.now() - startedWaiting));
  const port = await listenOn(server, listen.port, listen.host);
  lifecycle.markReady();
  return { port, adminPort };
}

/**
 * The shutdown: readiness fails first; the API port serves on through the delay (the load
 * balancer's time to notice), then stops accepting and its in-flight requests end (or are cut at
 * the bound); the admin port goes next, so `/readyz` answers 503 meanwhile; then every part, in
 * the reverse order of its building.
 */
export async function stopServing(
  { foundation, lifecycle }: ReplicaParts,
  { server, adminServer }: Servers,
  closeOptions: CloseOptions,
): Promise<void> {
  lifecycle.leave();
  const delayMs = closeOptions.delayMs ?? 0;
  if (delayMs > 0) {
    foundation.logger.info({ delayMs }, 'readiness off; serving until the drain');
    await new Promise((resolve) => setTimeout(resolve, delayMs));
  }
  foundation.logger.info({ drainMs: closeOptions.drainMs }, 'draining');
  lifecycle.drain();
  await closeServer(server, closeOptions.drainMs);
  await closeServer(adminServer, 1_000);
  await foundation.closers.closeAll((part, error) =>
    foundation.logger.warn({ ...errorFields(error), part }, 'part not closed'),
  );
}
