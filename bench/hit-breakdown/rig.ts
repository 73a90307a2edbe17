/**
 * The parts the hit breakdown times, built by the product's own wiring: a replica made by
 * `createProxyApp` (src/app.ts) over the bench proxies' config (bench/lib/bench-config.ts, keys
 * under the `benchhb` prefix) and a Redis, started as a replica starts (`listen`, on a loopback
 * port no request of the bench reaches), and every part a row times taken from what that wiring
 * returns: the data plane's options and parts, the store, the L1, the policies. Its request log is
 * the shipped one (a turn's lines in one write, 4 KiB buffered) on /dev/null, watched so that every
 * answer is known to be a hit; its upstream is a port nothing listens on, which a hit never reaches.
 * The in-process limiter of the alternative row is a second replica's, wired without Redis.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { createProxyApp, type ProxyApp, type ProxyAppOptions } from '../../src/app.js';
import type { CachePolicies } from '../../src/cache/read/policy.js';
import type { L1Cache } from '../../src/cache/stores/l1.js';
import type { CacheStore } from '../../src/cache/stores/store.js';
import { loadConfigFile } from '../../src/config/load.js';
import type { InboundLimiter } from '../../src/limits/inbound.js';
import { createLogger, type RequestLog, type RequestLogFields } from '../../src/observability/logger.js';
import type { DataPlaneOptions } from '../../src/planes/data/data-plane.js';
import type { DataPlaneParts } from '../../src/planes/data/steps.js';
import { createRedisClient } from '../../src/platform/redis/connection.js';
import { createCanonicalMemo } from '../../src/request/memo.js';
import { NEVER_REFUSING, writeBenchConfig } from '../lib/bench-config.js';
import { keep } from './measure.js';

/** The prefix of every key the rig writes, and deletes when it closes. */
export const PREFIX = 'benchhb';
/** The discard port on loopback: nothing answers there, and a hit never asks. */
const NO_UPSTREAM = 'http://127.0.0.1:9';

export type WatchedLog = ReturnType<typeof watchedLog>;

/**
 * The request log as the data plane is given it, watching every answer: a hit must be answered
 * 200 from the cache, by the last step of its path and by no step before.
 */
function watchedLog(requestLog: RequestLog) {
  let answers = 0;
  let wrong: string | undefined;
  let last: RequestLogFields | undefined;
  let settle: (() => void) | undefined;
  const log: RequestLog = (fields) => {
    requestLog(fields);
    answers += 1;
    last = fields;
    if (fields.status !== 200 || fields.cache !== 'hit') wrong ??= `${String(fields.status)} (${String(fields.cache)})`;
    const done = settle;
    settle = undefined;
    done?.();
  };
  return {
    log,
    get answers(): number {
      return answers;
    },
    /** The fields of the latest answer: a real line, for timing the log alone. */
    get last(): RequestLogFields | undefined {
      return last;
    },
    /** Resolves at the next answer. */
    next(): Promise<void> {
      return new Promise<void>((resolve) => {
        settle = resolve;
      });
    },
    expectOnlyHits(what: string): void {
      if (wrong !== undefined) throw new Error(`hit-breakdown: ${what}: a request was answered ${wrong}, not a hit`);
    },
  };
}

/** The replica's parts the rows time, and the variant one row swaps in. */
export interface Rig {
  /** The replica's data plane options, its request log watched. */
  readonly planeOptions: DataPlaneOptions;
  /** What createDataPlane makes of `planeOptions`: what the steps are given. */
  readonly parts: DataPlaneParts;
  readonly answers: WatchedLog;
  /** The replica's request log, unwatched. */
  readonly requestLog: RequestLog;
  readonly destination: ReturnType<typeof pino.destination>;
  readonly keyPrefix: string;
  /** How long the L1 keeps a copy (`cache.l1.ttl`): each process reads each key from Redis once per that. */
  readonly l1TtlSeconds: number;
  readonly store: CacheStore;
  readonly l1: L1Cache;
  readonly policies: CachePolicies;
  /** The inbound limits of a single replica: in process, no Redis. */
  readonly localLimiter: InboundLimiter;
  close(): Promise<void>;
}

/**
 * The bench proxies' config, with the rig's key prefix, and no page expiring: the breakdown times
 * the steps of a hit, and a page that turned stale during a long step would be another path.
 */
function benchConfig(): ProxyAppOptions['config'] {
  const dir = mkdtempSync(join(tmpdir(), 'hit-breakdown-'));
  try {
    return loadConfigFile(writeBenchConfig(dir, 'bench.yaml', NEVER_REFUSING, PREFIX, undefined, false));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** Deletes every key under `prefix` (plain, and hash-tagged as the budget and the operator state write them). */
async function deleteKeys(redisUrl: string, prefix: string, commandTimeoutMs: number): Promise<void> {
  const client = createRedisClient({ url: redisUrl, commandTimeoutMs });
  try {
    if (client.status !== 'ready') await once(client, 'ready');
    for (const pattern of [`${prefix}:*`, `{${prefix}:*`]) {
      const keys = await client.keys(pattern);
      if (keys.length > 0) await client.del(...keys);
    }
  } finally {
    client.disconnect();
  }
}

export async function wire(redisUrl: string, secret: string): Promise<Rig> {
  const config = benchConfig();
  // The shipped destination's settings (src/observability/logger.ts), writing to /dev/null.
  const destination = pino.destination({ dest: '/dev/null', sync: true, minLength: 4096 });
  const options: ProxyAppOptions = {
    upstreamUrl: NO_UPSTREAM,
    keys: { kind: 'secret', secret },
    config,
    logger: createLogger('info', destination),
    redis: { url: redisUrl },
    processMetrics: false,
  };
  const apps: ProxyApp[] = [];
  /** Set once Redis answered: only then are there keys to delete, and a Redis to delete them in. */
  let reached = false;
  const close = async (): Promise<void> => {
    // Leave nothing behind: the replicas (their connections and timers), the bench keys, the log stream.
    for (const app of apps.splice(0).reverse()) await app.close({ drainMs: 1_000 });
    if (reached) await deleteKeys(redisUrl, config.cache.keyPrefix, config.redis.commandTimeoutMs);
    await new Promise<void>((resolve) => {
      destination.flush((error?: Error) => {
        keep(error);
        resolve();
      });
    });
    destination.end();
  };
  try {
    const app = await createProxyApp(options);
    apps.push(app);
    await app.listen({ port: 0, host: '127.0.0.1' });
    if (app.parts.shared.redis?.client.status !== 'ready')
      throw new Error(`hit-breakdown: Redis at ${redisUrl} is not ready`);
    reached = true;
    // A replica serves no request before it has read a settled operator state (src/control/operator-control.ts):
    // on a Redis that holds none yet, within a sync interval and a command's timeout.
    await app.control.confirmation;
    const l1 = app.parts.reads.cache.l1;
    if (l1 === undefined) throw new Error('hit-breakdown: the replica holds no L1');
    const single = await createProxyApp({ ...options, redis: undefined });
    apps.push(single);
    const answers = watchedLog(app.dataPlane.log);
    const planeOptions: DataPlaneOptions = { ...app.dataPlane, log: answers.log };
    return {
      planeOptions,
      // The fields createDataPlane gives the steps, from these options, and a memo of their own.
      parts: { ...planeOptions, memo: createCanonicalMemo() },
      answers,
      requestLog: app.dataPlane.log,
      destination,
      keyPrefix: config.cache.keyPrefix,
      l1TtlSeconds: config.cache.l1.ttl,
      store: app.store,
      l1,
      policies: app.policies,
      localLimiter: single.dataPlane.limiter,
      close,
    };
  } catch (error) {
    await close();
    throw error;
  }
}
