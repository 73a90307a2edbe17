/**
 * Prefetch across replicas (docs/cache.md#prefetch): the coalescing lease covers
 * prefetches too. Two proxy processes on a real Redis Cluster (and on one Redis), prefetch on;
 * two walkers of one company walk the same collection at once, one through each replica, so that
 * both replicas fetch ahead of their walker at the same time. What must hold, counted at the
 * sandbox: every page reaches the upstream once, whichever replica fetched it ahead, and both
 * walkers read the upstream's pages. Then a walker sent to each replica in turn, as a round-robin
 * balancer does: every page fetched ahead is counted used once over the two replicas, whichever
 * fetched it and whichever took it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { getWithToken, send } from '../helpers/http.js';
import { type Replica, startReplicas, unmetLimits, until } from '../helpers/replicas.js';
import { startSandbox } from '../helpers/sandbox.js';
import { REDIS_TOPOLOGIES, type SharedRedis, settledOperatorState, startSharedRedis } from '../helpers/shared-redis.js';

const secret = 'prefetch across replicas: a secret of thirty-two bytes';

/**
 * Follows the collection to its end, each request to the next of `bases` in turn; the ids read, in
 * order. `beforeNext`, if given, is awaited before each request that follows a cursor, with the
 * turn and the cursor.
 */
async function walk(
  bases: string | readonly string[],
  bearer: string,
  perPage: number,
  beforeNext?: (turn: number, after: number) => Promise<void>,
): Promise<number[]> {
  const ids: number[] = [];
  let after: number | undefined;
  for (let turn = 0; ; turn++) {
    const target = `${API_PREFIX}/movements?per_page=${String(perPage)}${after === undefined ? '' : `&after_id=${String(after)}`}`;
    const base = typeof bases === 'string' ? bases : (bases[turn % bases.length] ?? '');
    const res = await getWithToken(base, target, bearer);
    expect(res.status, target).toBe(200);
    const page = JSON.parse(res.body.toString()) as {
      data: Array<{ id: number }>;
      meta: { has_more: boolean; next_after_id?: number };
    };
    ids.push(...page.data.map((r) => r.id));
    if (!page.meta.has_more) return ids;
    after = page.meta.next_after_id;
    // The walker's own work on a page: the replicas fetch ahead meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 15));
    if (after !== undefined) await beforeNext?.(turn + 1, after);
  }
}

/** A replica's prefetch counts by result, from its metrics. */
async function prefetches(replica: Replica): Promise<Record<string, number>> {
  const text = (await send(replica.adminUrl, '/metrics')).body.toString();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^slab_proxy_prefetches_total\{result="([a-z]+)"\} (\d+)/gm))
    counts[match[1] ?? ''] = Number(match[2]);
  return counts;
}

describe.each(REDIS_TOPOLOGIES)('prefetch across two replicas (%s Redis)', (topology) => {
  let redis: SharedRedis;
  let sandbox: Sandbox;
  let replicas: Replica[] = [];
  beforeAll(async () => {
    redis = await startSharedRedis(topology);
    await settledOperatorState(redis);
    sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
    replicas = await startReplicas(
      2,
      { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env },
      [
        'cache:',
        '  resources: { movements: { ttl: 300, prefetch: true } }',
        '  prefetch: { depth: 3, maxConcurrent: 4, maxPerCompany: 2 }',
        unmetLimits(2),
      ].join('\n'),
    );
  });
  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox?.close();
    await redis?.stop();
  });

  it('each page reaches the upstream once, though both replicas fetch ahead of their walkers at once', {
    timeout: 60_000,
  }, async () => {
    const [one, two] = replicas as [Replica, Replica];
    const bearer = await mintDevToken({ company: 1, secret });
    const direct = await walk(sandbox.url, bearer, 20);
    sandbox.resetStats();
    // Each upstream page takes a while: fetches ahead overlap the walkers' requests.
    sandbox.faults.set({ latencyMs: 25 });
    const [first, second] = await Promise.all([walk(one.url, bearer, 20), walk(two.url, bearer, 20)]);
    sandbox.faults.set({});
    expect(first).toEqual(direct);
    expect(second).toEqual(direct);
    const counts = Object.values(sandbox.stats().byTarget);
    expect(counts.length).toBe(Math.ceil(direct.length / 20));
    expect(counts.filter((n) => n !== 1)).toEqual([]);
  });

  it('counts each page fetched ahead used once over the replicas, when the walker goes to each in turn', {
    timeout: 60_000,
  }, async () => {
    const bearer = await mintDevToken({ company: 2, secret });
    const before = await Promise.all(replicas.map(prefetches));
    sandbox.faults.set({ latencyMs: 25 });
    // Every page after the second is fetched ahead (a first step along a cursor walks one page
    // ahead). The walker asks for it once its fetch has reached the upstream, so under its lease:
    // asked sooner, on the other replica, the walker's own fill could win the lease, and which
    // replica takes what would depend on the host's speed.
    const fetchedAhead = (after: number): boolean => {
      const cursor = new RegExp(`[?&]after_id=${String(after)}(?:&|$)`);
      return Object.keys(sandbox.stats().byTarget).some((t) => cursor.test(t) && /[?&]per_page=15(?:&|$)/.test(t));
    };
    const ids = await walk(
      replicas.map((r) => r.url),
      bearer,
      15,
      (turn, after) =>
        turn >= 2 ? until(() => fetchedAhead(after), `page after ${String(after)} fetched ahead`) : Promise.resolve(),
    );
    sandbox.faults.set({});
    expect(ids.length).toBeGreaterThan(45);
    let after: Array<Record<string, number>> = [];
    const sum = (result: string): number =>
      after.reduce((total, counts, i) => total + (counts[result] ?? 0) - (before[i]?.[result] ?? 0), 0);
    // The walk went to its end: every page fetched ahead was read by the walker, on one replica or
    // the other. A take is counted once the store has answered it, after the page was sent.
    await until(
      async () => {
        after = await Promise.all(replicas.map(prefetches));
        return sum('used') >= sum('started');
      },
      `used = started (${JSON.stringify(after)})`,
    ).catch(() => undefined);
    expect(sum('started')).toBeGreaterThan(0);
    expect(sum('used'), JSON.stringify({ before, after })).toBe(sum('started'));
    expect(sum('wasted')).toBe(0);
    // Each replica took pages the other fetched: the count is the fleet's, not the fetcher's.
    expect(after.every((counts, i) => (counts.used ?? 0) > (before[i]?.used ?? 0))).toBe(true);
  });
});
