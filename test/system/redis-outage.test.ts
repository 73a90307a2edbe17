/**
 * A Redis outage costs readers nothing (docs/cache.md#when-redis-fails,
 * docs/limits.md#the-upstream-budget): two replicas on one Redis, with the shipped upstream budget
 * (`budgetCutOff: share`), serve a steady load of warm pages and a trickle of cold ones while Redis
 * is killed and restarted 4 s later, paused (SIGSTOP) for 5 s, flushed, and restarted empty. What
 * must hold in each: every answer a 200, none waiting out the budget's bound
 * (`upstream.maxQueueWait`); while Redis cannot be asked, no warm page sent to the upstream (the
 * L1 serves them); and where Redis lost the pages, each fetched again once for both replicas, but
 * for the fetches of a replica whose cache commands failed meanwhile (coalescing across replicas
 * fails open then: each such fetch follows a failure the replica counts in
 * `slab_proxy_redis_errors_total{component="cache"}`). Counted at the sandbox. The same faults on a Redis Cluster are test/system/cluster-failover.test.ts's.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { coldTargets } from '../helpers/cold-targets.js';
import { recordFigure } from '../helpers/figures.js';
import { getWithToken, send } from '../helpers/http.js';
import { closedLoop } from '../helpers/load.js';
import { parseExposition } from '../helpers/prometheus.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { budgetMode, type Replica, redisOk, startReplicas, unmetLimits, until } from '../helpers/replicas.js';
import { startSandbox, upstreamTarget } from '../helpers/sandbox.js';

const secret = 'redis outage: thirty-two bytes at least, to be sure';
const COMPANIES = [1, 2];
const REPLICAS = 2;
/** `upstream.maxQueueWait` as shipped, ms: no answer may take longer (it would have been a 503). */
const MAX_QUEUE_WAIT_MS = 2_000;
/** One request in this many is a cold page. */
const COLD_EVERY = 5;

interface Page {
  readonly path: string;
  readonly token: string;
}

let redis: RedisServer;
let sandbox: Sandbox;
let replicas: Replica[] = [];
const warm: Page[] = [];
let coldToken = '';
const coldTarget = coldTargets(7_000_000);

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  redis = await startRedis();
  sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
  replicas = await startReplicas(
    REPLICAS,
    { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, REDIS_URL: redis.url },
    // Every page fresh far longer than the test: what reaches the upstream is what the outage sent
    // (`movements` is shipped with 10 s: a refresh of it would count as a second fetch).
    [
      'cache:',
      '  defaults: { ttl: 300, staleWhileRevalidate: 300, staleIfError: 600 }',
      '  resources: { movements: { ttl: 300 } }',
      unmetLimits(REPLICAS),
    ].join('\n'),
  );
  for (const company of COMPANIES) {
    const token = await mintDevToken({ company, secret });
    coldToken = token;
    // A page size per company: the upstream counts requests by target, which holds no company.
    for (const resource of RESOURCE_NAMES)
      warm.push({ path: `${API_PREFIX}/${resource}?per_page=${String(40 + company)}`, token });
  }
  // Warm: every page stored, and held by every replica.
  for (const page of warm)
    for (const replica of replicas) expect((await getWithToken(replica.url, page.path, page.token)).status).toBe(200);
}, 60_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
  await sandbox?.close();
  await redis?.stop();
});

async function flushAll(): Promise<void> {
  const client = new Redis(redis.url);
  try {
    await client.flushall();
  } finally {
    client.disconnect();
  }
}

/** Upstream requests for the warm pages so far. */
function warmFetches(): number {
  const byTarget = sandbox.stats().byTarget;
  return warm.reduce((sum, page) => sum + (byTarget[upstreamTarget(page.path)] ?? 0), 0);
}

/**
 * The warm pages fetched more than once since `since` (the sandbox's counts by target), each with
 * the request ids that fetched it among the last requests the sandbox received (an id's first part
 * names the replica: src/http/request-id.ts): what a failed count shows.
 */
function twiceFetched(since: Readonly<Record<string, number>>): string {
  const byTarget = sandbox.stats().byTarget;
  const received = sandbox.received();
  return warm
    .map((page) => upstreamTarget(page.path))
    .filter((target) => (byTarget[target] ?? 0) - (since[target] ?? 0) > 1)
    .map(
      (target) =>
        `${target}: ${received
          .filter((r) => r.target === target)
          .map((r) => r.requestId ?? '?')
          .join(', ')}`,
    )
    .join('; ');
}

/** The warm pages fetched at least once since `since` (the sandbox's counts by target). */
function fetchedSince(since: Readonly<Record<string, number>>): number {
  const byTarget = sandbox.stats().byTarget;
  return warm
    .map((page) => upstreamTarget(page.path))
    .filter((target) => (byTarget[target] ?? 0) > (since[target] ?? 0)).length;
}

/** Every replica connected to Redis again, its upstream budget on the shared ledger. */
async function recovered(): Promise<void> {
  await until(
    async () =>
      (await Promise.all(replicas.map(async (r) => (await redisOk(r)) && (await budgetMode(r)) === 'shared'))).every(
        Boolean,
      ),
    'every replica back on Redis and on the shared ledger',
    15_000,
  );
}

interface Outcome {
  readonly byStatus: Readonly<Record<string, number>>;
  readonly errors: number;
  readonly answers: number;
  readonly slowest: number;
  /** Warm pages fetched from the upstream while Redis could not be asked. */
  readonly warmDuring: number;
  /** Warm pages fetched from the upstream from the fault until recovered and a second after. */
  readonly warmInAll: number;
  /** The replicas' cache commands that failed over the same time (`slab_proxy_redis_errors_total`). */
  readonly cacheFailures: number;
  /** The warm pages fetched twice or more, and by whom (`twiceFetched`). */
  readonly twice: string;
  /** The warm pages fetched at least once from the fault until recovered and a second after. */
  readonly refetched: number;
}

/** The cache commands that have failed so far, on every replica. */
async function cacheFailures(): Promise<number> {
  const counts = await Promise.all(
    replicas.map(async (replica) =>
      parseExposition((await send(replica.adminUrl, '/metrics')).text).value('slab_proxy_redis_errors_total', {
        component: 'cache',
      }),
    ),
  );
  return counts.reduce((sum, n) => sum + n, 0);
}

/** A fault: `begin` runs the outage's window (Redis cannot be asked meanwhile), `end` ends it. */
interface Fault {
  readonly begin: () => Promise<void>;
  readonly end: () => Promise<void> | void;
}

/**
 * A steady load over both replicas (warm pages, a cold one every `COLD_EVERY`) through `fault`;
 * then until recovered, and a second more.
 */
async function underLoad(name: string, fault: Fault): Promise<Outcome> {
  let stopped = false;
  const startedAt = new Map<number, number>();
  let slowest = 0;
  const load = closedLoop({
    connections: 8,
    durationMs: 60_000,
    next: (i) => {
      startedAt.set(i, Date.now());
      const base = replicas[i % REPLICAS]?.url ?? '';
      if (i % COLD_EVERY === COLD_EVERY - 1) return { base, path: coldTarget(), token: coldToken };
      const page = warm[i % warm.length] ?? warm[0];
      if (page === undefined) throw new Error('no pages');
      return { base, path: page.path, token: page.token };
    },
    onAnswer: (i, _status, _headers, at) => {
      slowest = Math.max(slowest, at - (startedAt.get(i) ?? at));
      startedAt.delete(i);
    },
    stopWhen: () => stopped,
  });
  await sleep(1_000);
  const before = warmFetches();
  const countsBefore = { ...sandbox.stats().byTarget };
  const failuresBefore = await cacheFailures();
  await fault.begin();
  const during = warmFetches() - before;
  await fault.end();
  await recovered();
  await sleep(1_000);
  stopped = true;
  const result = await load;
  const outcome = {
    ...result,
    slowest,
    warmDuring: during,
    warmInAll: warmFetches() - before,
    cacheFailures: (await cacheFailures()) - failuresBefore,
    twice: twiceFetched(countsBefore),
    refetched: fetchedSince(countsBefore),
  };
  recordFigure('redis-outage', name, outcome);
  return outcome;
}

function expectNothingSeen(outcome: Outcome): void {
  expect(outcome.errors).toBe(0);
  expect(Object.keys(outcome.byStatus)).toEqual(['200']);
  expect(outcome.answers).toBeGreaterThan(100);
  expect(outcome.slowest).toBeLessThan(MAX_QUEUE_WAIT_MS);
}

/**
 * Redis came back without the warm pages: each is fetched again (every one is read in the second
 * after recovery), and once for both replicas — a second fetch only where a cache command failed.
 */
function expectEachFetchedOnce(outcome: Outcome): void {
  expect(outcome.refetched).toBe(warm.length);
  expect(outcome.warmInAll, outcome.twice).toBeLessThanOrEqual(warm.length + outcome.cacheFailures);
}

describe('a Redis outage under load, two replicas on one Redis: readers see nothing', () => {
  it('killed, restarted 4 s later (empty): no warm page to the upstream while down; each once after', {
    timeout: 60_000,
  }, async () => {
    const outcome = await underLoad('killed, restarted 4 s later', {
      begin: async () => {
        await redis.kill();
        await sleep(4_000);
      },
      end: () => redis.restart(),
    });
    expectNothingSeen(outcome);
    expect(outcome.warmDuring).toBe(0);
    expectEachFetchedOnce(outcome);
  });

  it('paused for 5 s: no warm page to the upstream, before or after the resume', { timeout: 60_000 }, async () => {
    const outcome = await underLoad('paused 5 s', {
      begin: async () => {
        redis.pause();
        await sleep(5_000);
      },
      end: () => redis.resume(),
    });
    expectNothingSeen(outcome);
    expect(outcome.warmDuring).toBe(0);
    expect(outcome.warmInAll).toBe(0);
  });

  it('flushed: every warm page fetched again once, for both replicas', { timeout: 60_000 }, async () => {
    const outcome = await underLoad('flushed', { begin: flushAll, end: () => undefined });
    expectNothingSeen(outcome);
    // No number was ever given out on the change channel: the flush is told by the sequence's
    // epoch, begun anew, and every replica confirms its copies, finds them gone, and fetches them.
    expectEachFetchedOnce(outcome);
  });

  it('restarted empty at once: every warm page fetched again once, for both replicas', {
    timeout: 60_000,
  }, async () => {
    const outcome = await underLoad('restarted empty', { begin: () => redis.kill(), end: () => redis.restart() });
    expectNothingSeen(outcome);
    expectEachFetchedOnce(outcome);
  });
});
