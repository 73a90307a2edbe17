/**
 * Which Redis nodes a replica sends commands to now: a short circuit breaker per node, fed by the
 * failures the stores, limits and coordinators see (connection.ts makes the clients).
 */
import calculateSlot from 'cluster-key-slot';
import { Cluster, type Redis } from 'ioredis';
import { isCommandTimeout } from './command-timeout.js';
import type { RedisClient } from './connection.js';

export interface RedisHealthOptions {
  /** How long a node is skipped after a failure, ms (default 500). */
  readonly suspendMs?: number;
  readonly now?: () => number;
  /** Told of each failure (a command that failed or timed out), for the metrics. */
  readonly onFailure?: () => void;
}

/** The whole client (a connection error, or a command without a key). */
const EVERY_NODE = '*';

/**
 * A short circuit breaker per Redis node: after a timeout or an error on a key, the node
 * that serves that key is skipped for `suspendMs`, so that a hung or failed node costs one request
 * the timeout, not every request. Per node, not per client: with a Redis Cluster, one master
 * failing over leaves the keys of the other masters served and stored.
 *
 * A timeout does not tell a hung node from one that was late once (its process not scheduled for
 * a moment on a busy host, the client's own pause): after a timeout the node is asked `PING`, with
 * the same command timeout, again after each one that times out, and it stays skipped until one
 * is answered in time, which ends the skip at once. A hung node answers none (each times out, no
 * request waits on them), so a hang costs one command its timeout, not one every `suspendMs`; a
 * node that was late is used again as soon as it answers. Without this, one late
 * reply from a healthy master skipped it for the whole `suspendMs` on the replica that saw it: the
 * L1 copies of its keys could not be read again (l1.ts) and ran out, and every one of them was
 * fetched from the upstream meanwhile (test/system/cluster-failover.test.ts, on a busy host).
 * Any other error (a closed connection, an error reply) is no sign of a late node: no probe.
 */
export class RedisHealth {
  readonly #client: RedisClient;
  readonly #suspendMs: number;
  readonly #now: () => number;
  readonly #onFailure: (() => void) | undefined;
  /** Node (`host:port`, or EVERY_NODE) → suspended until, ms. */
  readonly #suspended = new Map<string, number>();
  /** Nodes being asked `PING` after a timeout. */
  readonly #probing = new Set<string>();
  #failures = 0;
  #refreshedAt = 0;

  constructor(client: RedisClient, options: RedisHealthOptions = {}) {
    this.#client = client;
    this.#suspendMs = options.suspendMs ?? 500;
    this.#now = options.now ?? Date.now;
    this.#onFailure = options.onFailure;
  }

  /** The node that serves `key`: its slot's master in a cluster; the one server otherwise. */
  #nodeOf(key: string): string {
    if (!(this.#client instanceof Cluster)) return 'single';
    return this.#client.slots[calculateSlot(key)]?.[0] ?? 'unknown';
  }

  #suspendedNow(node: string): boolean {
    const until = this.#suspended.get(node);
    if (until === undefined) return false;
    if (this.#now() < until) return true;
    this.#suspended.delete(node);
    return false;
  }

  /** True when commands on `key` (or any command, without one) may be sent now. */
  usable(key?: string): boolean {
    if (this.#client.status !== 'ready') return false;
    if (this.#suspended.size === 0) return true; // the usual case: nothing to look up
    if (this.#suspendedNow(EVERY_NODE)) return false;
    return key === undefined || !this.#suspendedNow(this.#nodeOf(key));
  }

  /**
   * A command on `key` failed with `error` (or, without a key, the connection): its node is
   * skipped a moment; after a timeout, until it answers a `PING` in time.
   */
  failed(key?: string, error?: unknown): void {
    this.#failures += 1;
    const at = this.#now();
    const node = key === undefined ? EVERY_NODE : this.#nodeOf(key);
    this.#suspended.set(node, at + this.#suspendMs);
    if (node !== EVERY_NODE && isCommandTimeout(error)) this.#probe(node);
    // A failed master's slots move to the replica that takes over: ask the cluster where they are
    // now (at most every 250 ms), rather than wait for the next periodic refresh.
    if (this.#client instanceof Cluster && at - this.#refreshedAt >= 250) {
      this.#refreshedAt = at;
      this.#client.refreshSlotsCache();
    }
    this.#onFailure?.();
  }

  /** The connection that serves `node`: the client itself, or the cluster's connection to it. */
  #connectionTo(node: string): Redis | undefined {
    if (!(this.#client instanceof Cluster)) return this.#client;
    return this.#client
      .nodes('all')
      .find((redis) => `${redis.options.host ?? ''}:${String(redis.options.port ?? '')}` === node);
  }

  /** Asks `node` PING until one is answered in time (the skip ends) or it is no longer skipped. */
  #probe(node: string): void {
    if (this.#probing.has(node)) return;
    const connection = this.#connectionTo(node);
    if (connection === undefined) return;
    this.#probing.add(node);
    const ask = (): void => {
      connection.ping().then(
        () => {
          this.#probing.delete(node);
          this.#suspended.delete(node);
        },
        (error: unknown) => {
          if (!isCommandTimeout(error)) return void this.#probing.delete(node);
          // Still silent: skipped while it is asked again.
          this.#suspended.set(node, Math.max(this.#suspended.get(node) ?? 0, this.#now() + this.#suspendMs));
          ask();
        },
      );
    };
    ask();
  }

  get failures(): number {
    return this.#failures;
  }

  /** `down`: not connected; `degraded`: a node (or all) skipped after a failure; else `ok`. */
  state(): 'ok' | 'degraded' | 'down' {
    if (this.#client.status !== 'ready') return 'down';
    for (const node of [...this.#suspended.keys()]) if (this.#suspendedNow(node)) return 'degraded';
    return 'ok';
  }
}
