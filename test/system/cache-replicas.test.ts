/**
 * Two proxy replicas, each a real process (`node dist/main.js`), sharing one real Redis — and a
 * real Redis Cluster — in front of one sandbox system of record: cluster-wide coalescing through
 * the Redis lease
 * and pub/sub, entries shared across replicas and across the tokens of one company, never across
 * companies, and a leader's private 403 never handed to the followers of other processes.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { getWithToken, type RawResponse } from '../helpers/http.js';
import { type Replica, startReplica } from '../helpers/replicas.js';
import { startSandbox, upstreamCount } from '../helpers/sandbox.js';
import { REDIS_TOPOLOGIES, type SharedRedis, settledOperatorState, startSharedRedis } from '../helpers/shared-redis.js';

const secret = randomBytes(32).toString('base64url');

function cacheStatus(res: RawResponse): string {
  return res.headers['cache-status'] ?? '';
}

describe.each(REDIS_TOPOLOGIES)('two replicas sharing Redis (%s)', (topology) => {
  let redis: SharedRedis;
  let sandbox: Sandbox;
  const replicas: Replica[] = [];

  beforeAll(async () => {
    redis = await startSharedRedis(topology);
    await settledOperatorState(redis);
    sandbox = await startSandbox({ keys: { kind: 'secret', secret } });
    const env = { UPSTREAM_URL: sandbox.url, JWT_SECRET: secret, ...redis.env };
    replicas.push(...(await Promise.all([startReplica(env), startReplica(env)])));
  });

  afterAll(async () => {
    await Promise.all(replicas.map((r) => r.process.stop('SIGKILL')));
    await sandbox?.close();
    await redis?.stop();
  });

  afterEach(() => {
    sandbox.faults.clear();
  });

  function replica(index: number): Replica {
    const found = replicas[index % replicas.length];
    if (found === undefined) throw new Error('no replica');
    return found;
  }

  it('coalesce one cold key into one upstream request across processes', async () => {
    const target = `${API_PREFIX}/receipts?per_page=11`;
    const token = await mintDevToken({ company: 1, secret });
    expect(upstreamCount(sandbox, target)).toBe(0);
    // Slow upstream: every request arrives while the one fetch is still running.
    sandbox.faults.set({ latencyMs: 500, resource: 'receipts' });
    const answers = await Promise.all(
      Array.from({ length: 200 }, (_, i) => getWithToken(replica(i).url, target, token)),
    );
    sandbox.faults.clear();

    expect(answers.map((a) => a.status)).toEqual(answers.map(() => 200));
    const bodies = new Set(answers.map((a) => a.text));
    expect(bodies.size).toBe(1);
    expect((JSON.parse(answers[0]?.text ?? '') as { data: unknown[] }).data.length).toBeGreaterThan(0);
    expect(upstreamCount(sandbox, target)).toBe(1);

    const statuses = answers.map(cacheStatus);
    const leaders = statuses.filter((s) => s === 'slab-proxy; fwd=miss; fwd-status=200; stored');
    expect(leaders).toHaveLength(1);
    const followers = statuses.filter((s) => s !== leaders[0]);
    expect(followers).toHaveLength(199);
    for (const status of followers) expect(status).toBe('slab-proxy; fwd=miss; fwd-status=200; collapsed');
    // The followers of both processes, not only the leader's own.
    for (const index of [0, 1]) {
      expect(
        answers.filter((a, i) => i % 2 === index && cacheStatus(a).endsWith('; collapsed')).length,
      ).toBeGreaterThanOrEqual(99);
    }
  });

  it('serves a page warmed through replica 1 as a hit on replica 2', async () => {
    const target = `${API_PREFIX}/warehouses?per_page=5`;
    const token = await mintDevToken({ company: 1, secret });
    const warmed = await getWithToken(replica(0).url, target, token);
    expect(warmed.status).toBe(200);
    expect(cacheStatus(warmed)).toBe('slab-proxy; fwd=miss; fwd-status=200; stored');
    expect(upstreamCount(sandbox, target)).toBe(1);

    const other = await getWithToken(replica(1).url, target, token);
    expect(other.status).toBe(200);
    expect(cacheStatus(other)).toMatch(/^slab-proxy; hit; ttl=\d+$/);
    expect(other.text).toBe(warmed.text);
    expect(other.headers.etag).toBe(warmed.headers.etag);
    expect(upstreamCount(sandbox, target)).toBe(1);
  });

  it('shares an entry between two tokens of one company across replicas, never with another company', async () => {
    const record = sandbox.dataset.get('receipts')?.find((r) => String(r.company_id) === '1');
    if (record === undefined) throw new Error('the sandbox has no receipt of company 1');
    const target = `${API_PREFIX}/receipts/${String(record.id)}`;
    const [first, second, otherCompany] = await Promise.all([
      mintDevToken({ company: 1, secret, subject: 'reader-a' }),
      mintDevToken({ company: 1, secret, subject: 'reader-b' }),
      mintDevToken({ company: 2, secret }),
    ]);

    const warmed = await getWithToken(replica(0).url, target, first);
    expect(warmed.status).toBe(200);
    expect((warmed.json() as { data: { id: number } }).data.id).toBe(record.id);
    expect(cacheStatus(warmed)).toBe('slab-proxy; fwd=miss; fwd-status=200; stored');
    expect(upstreamCount(sandbox, target)).toBe(1);

    const shared = await getWithToken(replica(1).url, target, second);
    expect(shared.status).toBe(200);
    expect(cacheStatus(shared)).toMatch(/^slab-proxy; hit; ttl=\d+$/);
    expect(shared.text).toBe(warmed.text);
    expect(upstreamCount(sandbox, target)).toBe(1);

    // Company 2 asks for company 1's record id on the replica that holds it hot: the upstream's
    // own 404 (seed §4: another company's record looks missing), never company 1's bytes.
    const foreign = await getWithToken(replica(1).url, target, otherCompany);
    expect(foreign.status).toBe(404);
    expect(cacheStatus(foreign)).toBe('slab-proxy; fwd=miss; fwd-status=404; stored');
    expect(foreign.text).not.toBe(warmed.text);
    expect(foreign.json()).not.toHaveProperty('data');
    expect(upstreamCount(sandbox, target)).toBe(2);

    // That 404 is company 2's own entry (notFoundTtl), shared by the other replica...
    const foreignAgain = await getWithToken(replica(0).url, target, otherCompany);
    expect(foreignAgain.status).toBe(404);
    expect(cacheStatus(foreignAgain)).toMatch(/^slab-proxy; hit; ttl=\d+$/);
    expect(foreignAgain.text).toBe(foreign.text);
    // ...and company 1 still gets its record.
    const stillMine = await getWithToken(replica(0).url, target, second);
    expect(stillMine.status).toBe(200);
    expect(stillMine.text).toBe(warmed.text);
    expect(upstreamCount(sandbox, target)).toBe(2);
  });

  it("does not share the leader's 403 with the followers of either process", async () => {
    const target = `${API_PREFIX}/remnants?per_page=13`;
    const tokens = await Promise.all(
      [0, 1, 2, 3].map((n) => mintDevToken({ company: 1, secret, subject: `reader-${String(n)}` })),
    );
    // Only the first upstream request (the lease holder's) answers 403, and slowly, so that every
    // other request is waiting on it: in its process (joined to the fill) or in the other one
    // (waiting on the Redis lease).
    sandbox.faults.set({ status: 403, latencyMs: 300, times: 1, resource: 'remnants' });
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => getWithToken(replica(i).url, target, tokens[i % tokens.length] ?? '')),
    );

    const forbidden = answers.filter((a) => a.status === 403);
    expect(forbidden).toHaveLength(1);
    expect(cacheStatus(forbidden[0] as RawResponse)).toBe('slab-proxy; fwd=miss; fwd-status=403');
    expect(forbidden[0]?.headers['cache-control']).toBe('no-store');
    const ok = answers.filter((a) => a.status !== 403);
    expect(ok.map((a) => a.status)).toEqual(ok.map(() => 200));
    expect(new Set(ok.map((a) => a.text)).size).toBe(1);
    for (const answer of ok)
      expect(cacheStatus(answer)).toMatch(/^slab-proxy; fwd=miss; fwd-status=200(; stored|; collapsed)$/);

    // One 403, then the followers fetch with their own tokens. The leader's process runs one new
    // fill under a new lease (its followers join it). The other process's followers were waiting on
    // the lease: its release wakes them, they look in Redis, and fetch themselves if the leader's
    // process has not stored its new fill yet. So 2 upstream requests, or 3 when the other process
    // looks before that store lands: never one per follower.
    const count = upstreamCount(sandbox, target);
    expect(count).toBeGreaterThanOrEqual(2);
    expect(count).toBeLessThanOrEqual(3);

    // The 403 was not cached: the next request is a hit of the 200 the followers stored.
    const after = await getWithToken(replica(0).url, target, tokens[0] ?? '');
    expect(after.status).toBe(200);
    expect(cacheStatus(after)).toMatch(/^slab-proxy; hit; ttl=\d+$/);
    expect(upstreamCount(sandbox, target)).toBe(count);
  });
});
