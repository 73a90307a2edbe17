/**
 * Soft invalidation across a fleet (docs/cache.md#soft-invalidation): three replicas on a real
 * Redis Cluster, the live sandbox sending each change it makes to one replica's
 * `/admin/cache/invalidate` (its webhook). The replicas hold their pages with a TTL of 300 s and an
 * L1 lifetime of 30 s, so that nothing but the invalidation can bring them a change within the test.
 * What must hold: every replica serves the changed pages within the poll's deadline (how soon is a
 * figure), the upstream is asked once for each page that could show the change and for nothing
 * else (a record not named stays a hit, and so does a list page whose keyset window cannot hold
 * the record: docs/cache.md#window-marks), and an invalidation taken before the master holding its
 * marks is killed still holds after the failover, for the pages it reaches and no other; on the
 * cluster after the failover, an appended record reaches only a list's last page, and a record
 * moved out of a filtered list only the page that showed it.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { ChangeWebhook } from '../../src/sandbox/change-webhook.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { recordFigure } from '../helpers/figures.js';
import { getWithToken } from '../helpers/http.js';
import { type Replica, startReplicas, unmetLimits, until } from '../helpers/replicas.js';
import { startSandbox, upstreamTarget } from '../helpers/sandbox.js';
import { type SharedRedis, settledOperatorState, startSharedRedis } from '../helpers/shared-redis.js';

const secret = 'soft invalidation: thirty-two bytes at least, surely';
const ADMIN_TOKEN = 'soft-invalidation-admin-token';
const LIST = `${API_PREFIX}/transfers?per_page=5`;
const OTHER_LIST = `${API_PREFIX}/transfers?per_page=9`;

let redis: SharedRedis;
let sandbox: Sandbox;
let replicas: Replica[] = [];
let token: string;
let webhook: ChangeWebhook;
/** The ids of the first list page's records, in order. */
let ids: number[] = [];

const recordPath = (id: number): string => `${API_PREFIX}/transfers/${String(id)}`;

/** The list's next page: its keyset window (above its cursor) holds none of the first page's records. */
const deeperPage = (): string => `${API_PREFIX}/transfers?after_id=${String(ids.at(-1) ?? 0)}&per_page=5`;

async function etagOn(replica: Replica, path: string): Promise<string> {
  const answer = await getWithToken(replica.url, path, token);
  expect(answer.status).toBe(200);
  return answer.headers.etag ?? '';
}

beforeAll(async () => {
  redis = await startSharedRedis('cluster');
  await settledOperatorState(redis);
  sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
  replicas = await startReplicas(
    3,
    { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ADMIN_TOKEN, ...redis.env },
    [
      'cache:',
      '  defaults: { ttl: 300, staleWhileRevalidate: 300, staleIfError: 600, notFoundTtl: 10 }',
      '  l1: { ttl: 30 }',
      unmetLimits(3),
    ].join('\n'),
  );
  token = await mintDevToken({ company: 1, secret });
  const first = await getWithToken(replicas[0]?.url ?? '', LIST, token);
  ids = (first.json() as { data: Array<{ id: number }> }).data.map((record) => record.id);
  webhook = new ChangeWebhook({ url: `${replicas[0]?.adminUrl ?? ''}/admin/cache/invalidate`, token: ADMIN_TOKEN });
  sandbox.live.webhook = webhook;
}, 60_000);

afterAll(async () => {
  await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
  await sandbox?.close();
  await redis?.stop();
});

/** Every page of a list from its start (`query` without a cursor), by `next_after_id`: their paths and ids. */
async function walk(query: string): Promise<Array<{ readonly path: string; readonly ids: number[] }>> {
  const pages: Array<{ path: string; ids: number[] }> = [];
  for (let afterId = 0, more = true; more; ) {
    const path = `${query}${afterId > 0 ? `&after_id=${String(afterId)}` : ''}`;
    const page = (await getWithToken(replicas[0]?.url ?? '', path, token)).json() as {
      data: Array<{ id: number }>;
      meta: { has_more: boolean; next_after_id: number | null };
    };
    pages.push({ path, ids: page.data.map((record) => record.id) });
    more = page.meta.has_more && page.meta.next_after_id !== null;
    afterId = page.meta.next_after_id ?? afterId;
  }
  return pages;
}

/** Every page on every replica, twice: stored, then held in each L1. */
async function warm(paths: readonly string[]): Promise<Map<string, string>> {
  const etags = new Map<string, string>();
  for (let round = 0; round < 2; round++)
    for (const path of paths) for (const replica of replicas) etags.set(path, await etagOn(replica, path));
  return etags;
}

/** Upstream requests for `path` since the last reset. */
function asked(path: string): number {
  return sandbox.stats().byTarget[upstreamTarget(path)] ?? 0;
}

describe('a change sent to one replica by the system of record', () => {
  it('reaches every replica: each serves the changed pages; the upstream is asked once per page that could show it', {
    timeout: 60_000,
  }, async () => {
    const [changed, untouched] = ids as [number, number];
    const deeper = deeperPage();
    const paths = [LIST, OTHER_LIST, deeper, recordPath(changed), recordPath(untouched)];
    const before = await warm(paths);
    sandbox.resetStats();
    expect(sandbox.live.change('transfers', 'update', changed)).toBeDefined();
    await webhook.idle();
    const deliveredAt = performance.now();
    expect(webhook.status()).toMatchObject({ delivered: 1, dropped: 0 });
    // Reached: the replica no longer answers with its copy as fresh (a stale answer while its
    // refresh runs, or the new page already). With an L1 lifetime of 30 s and a TTL of 300 s, only
    // the invalidation can have told it.
    const reachedMs = await Promise.all(
      replicas.map(async (replica) => {
        await until(async () => {
          const answer = await getWithToken(replica.url, LIST, token);
          const stale = /stale-while-revalidate/.test(answer.headers['cache-status'] ?? '');
          return stale || answer.headers.etag !== before.get(LIST);
        }, 'the invalidation');
        return Math.round(performance.now() - deliveredAt);
      }),
    );
    recordFigure(
      'soft-invalidation',
      'ms from the webhook acknowledged to a stale or new list on each replica',
      reachedMs,
    );
    for (const replica of replicas) {
      await until(
        async () => (await etagOn(replica, recordPath(changed))) !== before.get(recordPath(changed)),
        'the change',
      );
      await until(async () => (await etagOn(replica, LIST)) !== before.get(LIST), 'the changed list');
    }
    // The record not named stays a hit everywhere, never asked of the upstream; and so does the
    // list page after the one that shows the change (docs/cache.md#window-marks).
    for (const replica of replicas)
      for (const path of [recordPath(untouched), deeper]) {
        const answer = await getWithToken(replica.url, path, token);
        expect(answer.headers['cache-status'], path).toMatch(/^slab-proxy; hit; ttl=\d+$/);
        expect(answer.headers.etag).toBe(before.get(path));
      }
    expect(asked(recordPath(untouched))).toBe(0);
    expect(asked(deeper)).toBe(0);
    // One refresh per page for the whole fleet (coalesced by the fill lease): the changed record's,
    // and each list page whose window holds it.
    expect(asked(recordPath(changed))).toBe(1);
    expect(asked(LIST)).toBe(1);
    expect(asked(OTHER_LIST)).toBeLessThanOrEqual(1);
  });

  it('still holds after the master holding its marks is killed and failed over', { timeout: 60_000 }, async () => {
    const cluster = redis.cluster;
    if (cluster === undefined) throw new Error('a cluster was asked for');
    const id = ids[2] ?? 0;
    const before = await warm([recordPath(id), deeperPage()]);
    // Changed at the upstream and marked, but read by nobody yet: only the mark says the page is stale.
    expect(sandbox.live.change('transfers', 'update', id)).toBeDefined();
    await webhook.idle();
    const master = await cluster.masterOf('{1:transfers}');
    // The mark is an ordinary key of the group's slot: replicated like the entries it marks.
    const direct = new Redis(master.port, '127.0.0.1');
    expect(await direct.wait(1, 2_000)).toBeGreaterThanOrEqual(1);
    direct.disconnect();
    await cluster.kill(master);
    await cluster.waitHealthy(20_000);
    sandbox.resetStats();
    for (const replica of replicas)
      await until(
        async () => (await etagOn(replica, recordPath(id))) !== before.get(recordPath(id)),
        'the change after the failover',
        20_000,
      );
    expect(asked(recordPath(id))).toBe(1);
    // The lists' mark names the record through the failover: the next page still cannot show it.
    for (const replica of replicas) expect(await etagOn(replica, deeperPage())).toBe(before.get(deeperPage()));
    expect(asked(deeperPage())).toBe(0);
  });

  it('after the failover, reaches a log’s last page alone when a record is appended, and a moved record’s filtered page alone', {
    timeout: 60_000,
  }, async () => {
    const log = await walk(`${API_PREFIX}/transfers?per_page=7`);
    const drafts = await walk(`${API_PREFIX}/transfers?status=draft&per_page=2`);
    const [firstLog, lastLog] = [log[0], log.at(-1)];
    const [firstDraft, secondDraft] = drafts;
    if (log.length < 2 || drafts.length < 3 || !firstLog || !lastLog || !firstDraft || !secondDraft)
      throw new Error('company 1 has too few transfers for a log of two pages and three pages of drafts');
    const paths = [firstLog.path, lastLog.path, firstDraft.path, secondDraft.path];
    const before = await warm(paths);
    sandbox.resetStats();
    // Appended: above every id, so only the page without more can show it.
    const appended = sandbox.live.change('transfers', 'append', '1');
    expect(appended).toBeDefined();
    await webhook.idle();
    for (const replica of replicas)
      await until(
        async () => (await etagOn(replica, lastLog.path)) !== before.get(lastLog.path),
        'the appended record',
      );
    expect(asked(lastLog.path)).toBe(1);
    for (const replica of replicas) expect(await etagOn(replica, firstLog.path)).toBe(before.get(firstLog.path));
    expect(asked(firstLog.path)).toBe(0);
    // Moved out of the drafts: the first drafts page showed it, the second's window cannot hold it.
    const movedId = firstDraft.ids[0] ?? 0;
    expect(sandbox.live.change('transfers', 'move', movedId)?.after.status).not.toBe('draft');
    await webhook.idle();
    for (const replica of replicas)
      await until(async () => (await etagOn(replica, firstDraft.path)) !== before.get(firstDraft.path), 'the move');
    expect(asked(firstDraft.path)).toBe(1);
    for (const replica of replicas) expect(await etagOn(replica, secondDraft.path)).toBe(before.get(secondDraft.path));
    expect(asked(secondDraft.path)).toBe(0);
  });
});
