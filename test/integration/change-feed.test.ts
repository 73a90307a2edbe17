/**
 * The change feed's credential and its limit (docs/operations.md#the-change-feed), on a real proxy
 * in front of the sandbox: a token that may only invalidate — from `INVALIDATE_TOKEN` and from the
 * lines of `INVALIDATE_TOKEN_FILE` — gets 200 on `POST /admin/cache/invalidate` and 403 on every
 * other operator route, changing nothing; the admin token keeps every route; rewriting the file and
 * re-reading it (the `SIGHUP` hook, or the poll) puts a new token in force and takes the removed
 * one out; with only the feed's token the admin port mounts only its route. A flood of changes is a
 * 429 with a whole-seconds `Retry-After` while the changes the bucket holds still pass, and the
 * sandbox's webhook delivers with the feed's token.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FeedReread } from '../../src/planes/admin/feed-credentials.js';
import type { Change } from '../../src/sandbox/change-log.js';
import { ChangeWebhook } from '../../src/sandbox/change-webhook.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { type RawResponse, send } from '../helpers/http.js';

const ADMIN_TOKEN = 'change-feed-admin-token-of-some-length';
const FEED_TOKEN = 'change-feed-env-token-of-some-length';
const FILE_OLD = 'change-feed-file-token-old';
const FILE_NEW = 'change-feed-file-token-new';
/** A bucket small enough to flood in a test: 2 changes a second, 10 at most. */
const CONFIG = { cache: { invalidation: { changesPerSecond: 2, burst: 10 } } };

let sandbox: Sandbox;
let proxy: ProxyHandle;
let feedOnly: ProxyHandle;
let dir: string;
let tokenFile: string;
/** The proxy's clock: the bucket refills only when the test moves it. */
let clock = Date.now();

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'change-feed-'));
  tokenFile = join(dir, 'tokens');
  writeFileSync(tokenFile, `\n  ${FILE_OLD}  \n\n`);
  sandbox = await startSandbox();
  proxy = await startProxy({
    upstreamUrl: sandbox.url,
    adminToken: ADMIN_TOKEN,
    invalidateToken: FEED_TOKEN,
    invalidateTokenFile: tokenFile,
    config: CONFIG,
    now: () => clock,
  });
  feedOnly = await startProxy({ upstreamUrl: sandbox.url, invalidateToken: FEED_TOKEN });
});

afterAll(async () => {
  await proxy?.close();
  await feedOnly?.close();
  await sandbox?.close();
  rmSync(dir, { recursive: true, force: true });
});

function call(
  on: ProxyHandle,
  token: string | undefined,
  method: string,
  target: string,
  body?: unknown,
): Promise<RawResponse> {
  return send(on.adminUrl ?? '', target, {
    method,
    headers: [
      ...(token === undefined ? [] : [['authorization', `Bearer ${token}`] as const]),
      ['content-type', 'application/json'],
    ],
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
}

/** A batch of `count` changes, one record each. */
function batch(count: number) {
  return {
    changes: Array.from({ length: count }, (_, i) => ({ company_id: 42, resource: 'transfers', ids: [i + 1] })),
  };
}

const ONE_CHANGE = { company_id: 42, resource: 'transfers', ids: [7] };

function invalidate(on: ProxyHandle, token: string | undefined, body: unknown = ONE_CHANGE): Promise<RawResponse> {
  return call(on, token, 'POST', '/admin/cache/invalidate', body);
}

/** The bucket full again: a minute on the proxy's clock. */
function refill(): void {
  clock += 60_000;
}

/** Every operator route but the feed's, and a path none is mounted on. */
const OPERATOR_ROUTES: ReadonlyArray<{ readonly method: string; readonly target: string; readonly body?: unknown }> = [
  { method: 'POST', target: '/admin/cache/purge', body: { company_id: 42 } },
  { method: 'GET', target: '/admin/revocations' },
  { method: 'POST', target: '/admin/revocations', body: { sub: 'feed-probe' } },
  { method: 'DELETE', target: '/admin/revocations/sub/feed-probe' },
  { method: 'GET', target: '/admin/blocks' },
  { method: 'PUT', target: '/admin/blocks/companies/42' },
  { method: 'GET', target: '/admin/config' },
  { method: 'GET', target: '/admin/cache/ttl' },
  { method: 'PUT', target: '/admin/cache/ttl/receipts', body: { ttl: 5 } },
  { method: 'GET', target: '/admin/upstream/weights' },
  { method: 'PUT', target: '/admin/upstream/weights/42', body: { weight: 5 } },
  { method: 'GET', target: '/admin/companies' },
  { method: 'GET', target: '/admin/cache/freshness' },
  { method: 'GET', target: '/admin/cache/invalidate' },
  { method: 'GET', target: '/admin/no-such-route' },
];

describe('the change feed’s token', () => {
  it('invalidates: 200, from INVALIDATE_TOKEN and from the file alike', async () => {
    refill();
    for (const token of [FEED_TOKEN, FILE_OLD]) {
      const res = await invalidate(proxy, token);
      expect(res.status, token).toBe(200);
      expect(res.json()).toEqual({ invalidated: 1, changes: 1 });
    }
  });

  it.each(OPERATOR_ROUTES)(
    'is refused 403 on $method $target, and changes nothing',
    async ({ method, target, body }) => {
      const res = await call(proxy, FEED_TOKEN, method, target, body);
      expect(res.status).toBe(403);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json()).toMatchObject({ code: 'forbidden', reason: 'permission' });
      expect(res.headers['www-authenticate']).toContain('error="insufficient_scope"');
    },
  );

  it('left the operator state as it was', async () => {
    const revocations = await call(proxy, ADMIN_TOKEN, 'GET', '/admin/revocations');
    const blocks = await call(proxy, ADMIN_TOKEN, 'GET', '/admin/blocks');
    const ttl = await call(proxy, ADMIN_TOKEN, 'GET', '/admin/cache/ttl');
    expect([revocations.json(), blocks.json(), ttl.json()]).toEqual([
      { items: [], next: null },
      { items: [], next: null },
      { overrides: {} },
    ]);
  });

  it('is not the admin token, and an unknown or missing token is still 401', async () => {
    for (const token of ['not-a-token-of-this-proxy', undefined]) {
      for (const res of [await invalidate(proxy, token), await call(proxy, token, 'GET', '/admin/config')]) {
        expect(res.status).toBe(401);
        expect(res.json()).toMatchObject({ code: 'unauthenticated' });
      }
    }
  });

  it('leaves the admin token every route, the feed’s included', async () => {
    refill();
    expect((await invalidate(proxy, ADMIN_TOKEN)).status).toBe(200);
    expect((await call(proxy, ADMIN_TOKEN, 'POST', '/admin/cache/purge', { company_id: 42 })).status).toBe(200);
    expect((await call(proxy, ADMIN_TOKEN, 'GET', '/admin/config')).status).toBe(200);
  });
});

describe('rotating the file without a restart', () => {
  it('by the SIGHUP hook: the new token in force, then the old one out', async () => {
    refill();
    writeFileSync(tokenFile, `${FILE_OLD}\n${FILE_NEW}\n`);
    expect(await proxy.app.rereadInvalidateTokens()).toBe('replaced');
    expect((await invalidate(proxy, FILE_OLD)).status).toBe(200);
    expect((await invalidate(proxy, FILE_NEW)).status).toBe(200);
    writeFileSync(tokenFile, `${FILE_NEW}\n`);
    expect(await proxy.app.rereadInvalidateTokens()).toBe('replaced');
    expect((await invalidate(proxy, FILE_OLD)).status).toBe(401);
    expect((await invalidate(proxy, FILE_NEW)).status).toBe(200);
    // INVALIDATE_TOKEN is not the file's: it stays.
    expect((await invalidate(proxy, FEED_TOKEN)).status).toBe(200);
  });

  it('by the poll, without a signal', async () => {
    refill();
    const feed = proxy.app.parts.access.feed;
    const replaced = new Promise<void>((resolve) =>
      feed?.onReread((result: FeedReread) => result === 'replaced' && resolve()),
    );
    writeFileSync(tokenFile, `${FILE_OLD}-polled\n`);
    await replaced;
    expect((await invalidate(proxy, `${FILE_OLD}-polled`)).status).toBe(200);
    expect((await invalidate(proxy, FILE_NEW)).status).toBe(401);
  });

  it('an emptied file keeps the tokens in force', async () => {
    refill();
    writeFileSync(tokenFile, '\n');
    expect(await proxy.app.rereadInvalidateTokens()).toBe('kept');
    expect((await invalidate(proxy, `${FILE_OLD}-polled`)).status).toBe(200);
  });
});

describe('with only INVALIDATE_TOKEN set', () => {
  it('the admin port mounts the feed’s route alone, behind its token', async () => {
    expect((await invalidate(feedOnly, FEED_TOKEN)).status).toBe(200);
    expect((await invalidate(feedOnly, undefined)).status).toBe(401);
    expect((await call(feedOnly, FEED_TOKEN, 'POST', '/admin/cache/purge', { company_id: 42 })).status).toBe(403);
    expect((await call(feedOnly, FEED_TOKEN, 'GET', '/admin/config')).status).toBe(403);
    expect((await call(feedOnly, undefined, 'GET', '/admin/config')).status).toBe(401);
    expect((await call(feedOnly, undefined, 'GET', '/healthz')).status).toBe(200);
  });
});

describe('a flood of changes', () => {
  it('is a 429 with Retry-After in whole seconds, while the changes the bucket holds pass', async () => {
    refill();
    expect((await invalidate(proxy, FEED_TOKEN, batch(8))).json()).toEqual({ invalidated: 1, changes: 8 });
    // 2 held: 3 missing at 2 a second is 1.5 s, told as 2.
    const flooded = await invalidate(proxy, FEED_TOKEN, batch(5));
    expect(flooded.status).toBe(429);
    expect(flooded.headers['retry-after']).toMatch(/^[1-9][0-9]*$/);
    expect(flooded.headers['retry-after']).toBe('2');
    expect(flooded.json()).toMatchObject({ code: 'rate_limited', policy: 'invalidation', retry_after: 2 });
    // The refused batch took nothing: the 2 held still pass.
    expect((await invalidate(proxy, FEED_TOKEN, batch(2))).status).toBe(200);
    expect((await invalidate(proxy, FEED_TOKEN)).status).toBe(429);
    clock += 2_000;
    expect((await invalidate(proxy, FEED_TOKEN, batch(4))).status).toBe(200);
  });

  it('a batch larger than the bucket is a 400 naming it, however long its sender would wait', async () => {
    refill();
    const res = await invalidate(proxy, FEED_TOKEN, batch(11));
    expect(res.status).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_body', pointer: '#/changes' });
    expect((await invalidate(proxy, FEED_TOKEN, batch(10))).status).toBe(200);
  });

  it('counts the changes refused, by reason', async () => {
    const scrape = await call(proxy, undefined, 'GET', '/metrics');
    expect(scrape.text).toContain('slab_proxy_invalidations_refused_total{reason="flood"} 6');
    expect(scrape.text).toContain('slab_proxy_invalidations_refused_total{reason="batch"} 11');
    expect(scrape.text).toContain('slab_proxy_rate_limited_total{policy="invalidation"} 2');
  });
});

describe('the sandbox’s webhook with the feed’s token', () => {
  it('delivers its changes', async () => {
    refill();
    const webhook = new ChangeWebhook({ url: `${feedOnly.adminUrl ?? ''}/admin/cache/invalidate`, token: FEED_TOKEN });
    const change: Change = {
      seq: 1,
      at: Date.now(),
      company: '1',
      resource: 'transfers',
      id: 10,
      kind: 'update',
      before: null,
      after: { id: 10, company_id: 1 },
    };
    webhook.changed(change);
    await webhook.idle();
    expect(webhook.status()).toMatchObject({ delivered: 1, dropped: 0, retries: 0, lastFailure: null });
    webhook.close();
  });
});
