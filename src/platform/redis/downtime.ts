/**
 * How long this replica has been without a usable Redis, for `slab_proxy_redis_down_seconds`:
 * from the moment its connection closed (or, at start, from when the client was made) until it
 * is ready again. A gauge of the duration rather than only `slab_proxy_redis_up` lets an alert
 * say "down for more than a minute" without depending on how often Prometheus scraped.
 */

/** The part of an ioredis client (single node or Cluster) this reads: its status and two events. */
export interface WatchedConnection {
  readonly status: string;
  on(event: 'ready' | 'close', listener: () => void): unknown;
}

/** Watches a connection; the returned function gives the seconds it has been down, 0 while ready. */
export function watchRedisDowntime(connection: WatchedConnection, now: () => number = Date.now): () => number {
  let downSince: number | undefined = connection.status === 'ready' ? undefined : now();
  connection.on('ready', () => {
    downSince = undefined;
  });
  connection.on('close', () => {
    downSince ??= now();
  });
  return () => {
    if (connection.status === 'ready') return 0;
    // Not ready without a 'close' seen (a status this code did not hear change): down from now.
    downSince ??= now();
    return Math.max(0, now() - downSince) / 1000;
  };
}
