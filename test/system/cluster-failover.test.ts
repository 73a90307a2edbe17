/**
 * A failed master costs readers nothing (docs/cache.md#when-redis-fails). Three replicas on a Redis
 * Cluster of 3 masters serve warm pages and a trickle of cold ones under load; one master is killed
 * (`kill -9`, failed over), then another is paused (SIGSTOP) for 5 s (failed over too), then every
 * master is flushed. What must hold: every answer a 200; through the kill and the pause not one
 * warm page refetched from the upstream (those of the healthy masters are read from the cache,
 * those of the failed ones from each replica's L1 until their slots are served again); after the
 * flush, each warm page fetched again once for the three replicas. How soon the throughput is back
 * is a figure, not an assertion: it is the host's speed as much as the proxy's.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { coldTargets } from '../helpers/cold-targets.js';
import { recordFigure } from '../helpers/figures.js';
import { getWithToken } from '../helpers/http.js';
import { closedLoop } from '../helpers/load.js';
import { type Replica, startReplicas, unmetLimits } from '../helpers/replicas.js';
import { startSandbox, upstreamTarget } from '../helpers/sandbox.js';
import { type SharedRedis, startSharedRedis } from '../helpers/shared-redis.js';
import type { ClusterNode, RedisCluster } from '../support/redis-cluster.js';

const secret = 'cluster failover: thirty-two bytes at least, surely';
const COMPANIES = [1, 2, 3];
/** One request in this many is a cold page. */
const COLD_EVERY = 5;
const coldTarget = coldTargets(8_000_000);
/**
 * The load goes on this long after the flush: three L1 lifetimes (the default's 1 s), in which every
 * replica's copy of every warm page meets the flushed Redis and the page is fetched again.
 */
const AFTER_FLUSH_MS = 3_000;

interface Page {
  readonly path: string;
  readonly company: number;
  readonly token: string;
  /** The master that holds the page's slot when the test starts. */
  master: ClusterNode;
}

let redis: SharedRedis;
let cluster: RedisCluster;
let sandbox: Sandbox;
let replicas: Replica[] = [];
const pages: Page[] = [];

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

beforeAll(async () => {
  redis = await startSharedRedis('cluster');
  if (redis.cluster === undefined) throw new Error('a cluster was asked for');
  cluster = redis.cluster;
  sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
  replicas = await startReplicas(
    3,
    { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env },
    [
      'cache:',
      '  defaults: { ttl: 300, staleWhileRevalidate: 300, staleIfError: 600, notFoundTtl: 10 }',
      '  resources: { movements: { ttl: 300 } }',
      unmetLimits(3),
    ].join('\n'),
  );
  for (const company of COMPANIES) {
    const token = await mintDevToken({ company, secret });
    for (const resource of RESOURCE_NAMES) {
      // A page size per company: the upstream counts requests by target, which holds no company.
      pages.push({
        path: `${API_PREFIX}/${resource}?per_page=${String(4 + company)}`,
        company,
        token,
        master: await cluster.masterOf(`{${String(company)}:${resource}}`),
      });
    }
  }
  // Warm: every page stored, through every replica.
  for (const page of pages)
    for (const replica of replicas) expect((await getWithToken(replica.url, page.path, page.token)).status).toBe(200);
});

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
  await sandbox?.close();
  await redis?.stop();
});

/** Upstream requests for the warm pages so far. */
function refetches(): number {
  const byTarget = sandbox.stats().byTarget;
  return pages.reduce((sum, page) => sum + (byTarget[upstreamTarget(page.path)] ?? 0), 0);
}

describe('a Redis Cluster master killed, then another paused, then all flushed, under load over 3 replicas', () => {
  it('answers every read 200, refetches no warm page through the failovers, and each once after the flush', {
    timeout: 90_000,
  }, async () => {
    const masters = await cluster.masters();
    const [killed, paused] = masters as [ClusterNode, ClusterNode, ClusterNode];
    sandbox.resetStats();

    const perSecond = new Map<number, number>();
    const statuses: Record<string, number> = {};
    const startedAt = Date.now();
    let flushedAt: number | undefined;
    const load = closedLoop({
      connections: 24,
      durationMs: 60_000,
      stopWhen: () => flushedAt !== undefined && Date.now() >= flushedAt + AFTER_FLUSH_MS,
      next: (i) => {
        const base = replicas[i % replicas.length]?.url ?? '';
        const page = pages[i % pages.length] ?? pages[0];
        if (page === undefined) throw new Error('no pages');
        if (i % COLD_EVERY === COLD_EVERY - 1) return { base, path: coldTarget(), token: page.token };
        return { base, path: page.path, token: page.token };
      },
      onAnswer: (_i, status, _headers, at) => {
        statuses[String(status)] = (statuses[String(status)] ?? 0) + 1;
        const second = Math.floor((at - startedAt) / 1000);
        perSecond.set(second, (perSecond.get(second) ?? 0) + 1);
      },
    });
    await sleep(4_000);
    const killedAt = Date.now();
    await cluster.kill(killed);
    await sleep(6_000);
    cluster.pause(paused);
    await sleep(5_000);
    cluster.resume(paused);
    await sleep(3_000);
    const throughFailovers = refetches();
    const atFlush = { ...sandbox.stats().byTarget };
    await cluster.flushAll();
    flushedAt = Date.now();
    const result = await load;
    const afterFlush = refetches() - throughFailovers;

    const series = [...perSecond.entries()].sort(([a], [b]) => a - b).map(([, n]) => n);
    const before = series.slice(1, 4);
    const baseline = before.reduce((sum, n) => sum + n, 0) / before.length;
    const killSecond = Math.floor((killedAt - startedAt) / 1000);
    const recoveredAt = series.findIndex((n, second) => second > killSecond && n >= baseline * 0.9);
    recordFigure('cluster-failover', 'throughput per second and refetches', {
      series,
      killSecond,
      pausedFrom: killSecond + 6,
      flushedAt: killSecond + 14,
      recoveredAfterSeconds: recoveredAt - killSecond,
      statuses,
      pages: pages.length,
      refetchedThroughFailovers: throughFailovers,
      refetchedAfterFlush: afterFlush,
      upstreamRequests: sandbox.stats().served,
    });
    expect(result.errors).toBe(0);
    expect(Object.keys(statuses)).toEqual(['200']);
    expect(throughFailovers).toBe(0);
    // Each page once after the flush: every one fetched again, and no more fetches than pages.
    const byTarget = sandbox.stats().byTarget;
    const fetchedAgain = pages.filter(
      (page) => (byTarget[upstreamTarget(page.path)] ?? 0) > (atFlush[upstreamTarget(page.path)] ?? 0),
    );
    expect(fetchedAgain.length).toBe(pages.length);
    expect(afterFlush).toBe(pages.length);
    // Served again after the failovers and the flush: every page answers 200.
    for (const page of pages)
      expect((await getWithToken(replicas[0]?.url ?? '', page.path, page.token)).status).toBe(200);
    expect(series.at(-2) ?? 0).toBeGreaterThan(0);
  });
});
