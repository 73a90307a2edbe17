/**
 * The change channel across a fleet, under load (docs/cache.md#the-l1): two replicas as processes
 * on one Redis and on a Redis Cluster, replica B serving a steady load of hits from its L1 while
 * replica A takes purges. What must hold whatever the channel loses:
 *
 * - a purge whose announcement B cannot hear (its subscription cut off, its reconnections refused)
 *   makes B stop vouching for its copies (a gap, or no verdict when its heartbeat is cut off too),
 *   and past one L1 lifetime after it B serves no copy from before the purge; no answer fails;
 * - the Redis process keeping the sequence replaced under load (one Redis restarted empty; on a
 *   cluster, its master killed and a replica promoted): B counts a failover (another process
 *   keeps the sequence), confirms its copies, and a purge made after it reaches B; no answer
 *   fails meanwhile.
 *
 * A copy from before a purge is told by its `Age`: the pages are warmed at least three seconds
 * before it, so an old copy is at least that old, and one filled after it is younger.
 */
import { Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { changeSequenceKey } from '../../src/cache/entry/cache-key.js';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { recordFigure } from '../helpers/figures.js';
import { getWithToken, send } from '../helpers/http.js';
import { type Replica, startReplicas, unmetLimits, until } from '../helpers/replicas.js';
import { startSandbox } from '../helpers/sandbox.js';
import { REDIS_TOPOLOGIES, type SharedRedis, settledOperatorState, startSharedRedis } from '../helpers/shared-redis.js';

const secret = 'change channel: thirty-two bytes at least, surely';
const ADMIN_TOKEN = 'change-channel-admin-token';
const SEQUENCE_KEY = changeSequenceKey('slab');
const PAGES = [3, 4, 5, 6].map((n) => `${API_PREFIX}/transfers?per_page=${String(n)}`);
/** Seconds the copies are old when a purge is made: an older answer is a copy from before it. */
const WARMED_FOR_S = 3;
/** `cache.l1.ttl` as shipped: how long a copy may serve past a change when the channel is cut. */
const L1_TTL_MS = 1_000;

interface Sample {
  readonly startedAt: number;
  readonly status: number;
  readonly ageSeconds: number;
}

/** A steady load of hits on one replica: a few loops, each request after the last. */
class Load {
  readonly samples: Sample[] = [];
  #running = true;
  readonly #workers: Promise<void>[];

  constructor(url: string, bearer: string) {
    this.#workers = Array.from({ length: 4 }, async (_, loop) => {
      for (let n = loop; this.#running; n++) {
        const startedAt = Date.now();
        const res = await getWithToken(url, PAGES[n % PAGES.length] ?? '', bearer).catch(() => undefined);
        this.samples.push({ startedAt, status: res?.status ?? 0, ageSeconds: Number(res?.headers.age ?? 'NaN') });
      }
    });
  }

  async stop(): Promise<void> {
    this.#running = false;
    await Promise.all(this.#workers);
  }
}

describe.each(REDIS_TOPOLOGIES)('the change channel on %s', (topology) => {
  let redis: SharedRedis;
  let sandbox: Sandbox;
  let a: Replica;
  let b: Replica;
  let token: string;
  let load: Load | undefined;

  beforeAll(async () => {
    redis = await startSharedRedis(topology);
    await settledOperatorState(redis);
    sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
    [a, b] = (await startReplicas(
      2,
      { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ADMIN_TOKEN, ...redis.env },
      [
        'cache:',
        '  defaults: { ttl: 300, staleWhileRevalidate: 300, staleIfError: 600, notFoundTtl: 10 }',
        unmetLimits(2),
      ].join('\n'),
    )) as [Replica, Replica];
    token = await mintDevToken({ company: 1, secret });
  }, 90_000);

  afterEach(async () => {
    await load?.stop();
    load = undefined;
  });

  afterAll(async () => {
    await Promise.all([a, b].map((r) => r?.process.stop('SIGKILL')));
    await sandbox?.close();
    await redis?.stop();
  });

  async function metric(replica: Replica, series: string): Promise<number> {
    const text = (await send(replica.adminUrl, '/metrics')).text;
    return Number(
      text
        .split('\n')
        .find((l) => l.startsWith(`${series} `))
        ?.slice(series.length + 1) ?? Number.NaN,
    );
  }

  async function gaps(replica: Replica): Promise<number> {
    let sum = 0;
    for (const gap of ['skipped', 'missed', 'regressed', 'failover'])
      sum += await metric(replica, `slab_proxy_l1_channel_gaps_total{gap="${gap}"}`);
    return sum;
  }

  async function purge(): Promise<void> {
    const res = await send(a.adminUrl, '/admin/cache/purge', {
      method: 'POST',
      headers: [
        ['Authorization', `Bearer ${ADMIN_TOKEN}`],
        ['Content-Type', 'application/json'],
      ],
      body: JSON.stringify({ company_id: 1, resource: 'transfers' }),
    });
    expect(res.status).toBe(200);
    expect(res.json()).toMatchObject({ purged: true });
  }

  /** Every page held by B (each filled through A, then read twice on B), and told of by its channel. */
  /**
   * The load on B runs on until a hundred answers begun an L1 lifetime after the purge, then stops:
   * every answer a 200, and none of those a copy from before the purge (as old as the warm-up).
   */
  async function expectNoCopyFromBefore(purgedAt: number): Promise<void> {
    const running = load;
    if (running === undefined) throw new Error('no load on B');
    const lifetime = purgedAt + L1_TTL_MS;
    await until(() => running.samples.filter((s) => s.startedAt > lifetime).length > 100, 'load after');
    const samples = running.samples;
    await running.stop();
    expect(samples.filter((s) => s.status !== 200)).toEqual([]);
    expect(samples.filter((s) => s.startedAt > lifetime && s.ageSeconds >= WARMED_FOR_S)).toEqual([]);
  }

  async function warmOnB(): Promise<void> {
    await until(async () => (await metric(b, 'slab_proxy_l1_channel_told')) === 1, 'B told');
    for (const page of PAGES) {
      expect((await getWithToken(a.url, page, token)).status).toBe(200);
      for (let i = 0; i < 2; i++) expect((await getWithToken(b.url, page, token)).status).toBe(200);
    }
  }

  /** Redis's clients in every node: what a cut-off concerns. */
  function nodes(): Redis[] {
    if (redis.server !== undefined) return [new Redis(redis.server.url)];
    return (redis.cluster?.nodes ?? []).map((node) => new Redis(node.port, '127.0.0.1'));
  }

  /**
   * Cuts every subscription off and refuses new connections (as a full Redis does), so that B
   * cannot hear what is announced; returns what gives them back.
   */
  async function cutSubscriptions(): Promise<() => Promise<void>> {
    const clients = nodes();
    // Every node refuses new connections first, then every subscription goes: one cut off from a
    // node would otherwise come back on another not yet full.
    for (const client of clients) {
      const connected = Number(/connected_clients:(\d+)/.exec(await client.info('clients'))?.[1]);
      const subscriptions = String(await client.call('CLIENT', 'LIST', 'TYPE', 'pubsub'))
        .split('\n')
        .filter((line) => line.trim() !== '').length;
      await client.config('SET', 'maxclients', String(Math.max(1, connected - subscriptions)));
    }
    for (const client of clients) await client.client('KILL', 'TYPE', 'pubsub');
    return async () => {
      for (const client of clients) {
        await client.config('SET', 'maxclients', '10000');
        client.disconnect();
      }
    };
  }

  it('serves no copy from before a purge it could not hear past one L1 lifetime, under load, and says why', async () => {
    await warmOnB();
    const warmedAt = Date.now();
    load = new Load(b.url, token);
    await until(() => load !== undefined && load.samples.length > 50, 'steady load');
    await until(() => Date.now() - warmedAt > WARMED_FOR_S * 1000, 'the copies old enough');
    const gapsBefore = await gaps(b);
    const restore = await cutSubscriptions();
    let purgedAt: number;
    try {
      purgedAt = Date.now();
      await purge();
      // B cannot vouch for its copies any more: a gap (the number given out and never heard), or,
      // should the cut-off also cost it its heartbeat, no verdict (each copy confirmed again).
      await until(
        async () => (await gaps(b)) > gapsBefore || (await metric(b, 'slab_proxy_l1_channel_told')) === 0,
        'B to stop vouching for its copies',
      );
      recordFigure(
        'change-channel',
        `${topology}: ms from a purge B could not hear to B no longer vouching`,
        Date.now() - purgedAt,
      );
    } finally {
      await restore();
    }
    // A lost announcement is noticed within two heartbeats (half a lifetime): past one lifetime,
    // every answer is a copy filled after the purge.
    await expectNoCopyFromBefore(purgedAt);
  }, 60_000);

  it('counts the sequence kept by another Redis process under load (a restart, a failover), and hears the purges made after it', async () => {
    await warmOnB();
    load = new Load(b.url, token);
    const failoversBefore = await metric(b, 'slab_proxy_l1_channel_gaps_total{gap="failover"}');
    if (redis.server !== undefined) {
      // One Redis restarted empty: the sequence is gone with everything else.
      await redis.server.kill();
      await redis.server.restart();
    } else {
      const cluster = redis.cluster;
      if (cluster === undefined) throw new Error('no Redis');
      // The master keeping the sequence killed: its replica, promoted, may lack its last numbers.
      await cluster.kill(await cluster.masterOf(SEQUENCE_KEY));
      await cluster.waitHealthy(20_000);
    }
    await until(
      async () => (await metric(b, 'slab_proxy_l1_channel_gaps_total{gap="failover"}')) > failoversBefore,
      'B to count another process keeping the sequence',
      20_000,
    );
    await until(async () => (await metric(b, 'slab_proxy_l1_channel_told')) === 1, 'B told again', 20_000);
    const warmedAt = Date.now();
    await until(() => Date.now() - warmedAt > WARMED_FOR_S * 1000, 'the copies old enough');
    await purge();
    const purgedAt = Date.now();
    // Heard at once; were its announcement lost, noticed within half a lifetime. No answer of B
    // begun a lifetime after it is a copy from before the purge.
    await expectNoCopyFromBefore(purgedAt);
  }, 90_000);
});
