/**
 * The bench's HAProxy anchor, for real: Debian's HAProxy with bench/haproxy-cache.cfg does the
 * proxy's job on a hit by configuration, so its figures are a peer's, not a cache's without auth.
 * Every request's token is verified (signature, algorithm, expiry), the resource's permissions are
 * read from its claims, the cache is keyed by company (a page warmed by one company is a miss for
 * another), and once warmed its origin sees nothing during a measured round, whose CPU is
 * HAProxy's own process's. Figures are checked for what they count, never for speed.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findHaproxy, type HaproxyCache, startHaproxyCache, warmHaproxy } from '../../bench/lib/haproxy.js';
import { closedLoopGenerator } from '../../bench/lib/load/generators.js';
import { stopEverything } from '../../bench/lib/processes.js';
import { measureRound } from '../../bench/lib/rounds.js';
import { baselineServed, startBaseline } from '../../bench/lib/services.js';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { token } from '../helpers/tokens.js';

const SECRET = 'bench-haproxy-test-secret_0123456789abcdefABCDEF';
const RECEIPTS = `${API_PREFIX}/receipts?per_page=30`;
const WAREHOUSES = `${API_PREFIX}/warehouses?per_page=30`;
const BODY = Buffer.from(JSON.stringify({ data: ['x'.repeat(2000)], meta: { has_more: false } }));

const workDir = mkdtempSync(join(tmpdir(), 'slab-bench-haproxy-'));
let origin = '';
let cache: HaproxyCache;

function bearer(value: string): Record<string, string> {
  return { authorization: `Bearer ${value}` };
}

async function status(path: string, headers: Record<string, string>): Promise<number> {
  const response = await fetch(`${cache.url}${path}`, { headers });
  await response.arrayBuffer();
  return response.status;
}

beforeAll(async () => {
  const haproxy = await findHaproxy();
  if ('missing' in haproxy) throw new Error(haproxy.missing);
  const pagesFile = join(workDir, 'pages.json');
  writeFileSync(
    pagesFile,
    JSON.stringify({ [RECEIPTS]: BODY.toString('base64'), [WAREHOUSES]: BODY.toString('base64') }),
  );
  origin = (await startBaseline('origin', pagesFile)).url;
  cache = await startHaproxyCache(haproxy.path, { dir: join(workDir, 'haproxy'), originUrl: origin, secret: SECRET });
});

afterAll(async () => {
  await stopEverything();
  rmSync(workDir, { recursive: true, force: true });
});

describe('the HAProxy anchor', () => {
  it('refuses what the proxy refuses: no token, a forged, expired or otherwise signed one, a missing permission', async () => {
    const valid = await token({ company: '1', secret: SECRET });
    const forged = await token({ company: '1', secret: `${SECRET}-other` });
    const [head = '', payload = ''] = valid.split('.');
    const expired = await new SignJWT({ company_id: '1', permissions: ['view_slab', 'view_slab_logistics'] })
      .setProtectedHeader({ alg: 'HS256' })
      .setExpirationTime(Math.floor(Date.now() / 1000) - 60)
      .sign(new TextEncoder().encode(SECRET));
    const hs512 = await new SignJWT({ company_id: '1', permissions: ['view_slab', 'view_slab_logistics'] })
      .setProtectedHeader({ alg: 'HS512' })
      .setExpirationTime('1h')
      .sign(new TextEncoder().encode(SECRET));
    const inventoryOnly = await token({ company: '1', secret: SECRET, permissions: ['view_slab'] });

    expect(await status(RECEIPTS, {})).toBe(401);
    expect(await status(RECEIPTS, bearer(forged))).toBe(401);
    expect(await status(RECEIPTS, bearer(`${head}.${payload}.`))).toBe(401);
    expect(await status(RECEIPTS, bearer(expired))).toBe(401);
    expect(await status(RECEIPTS, bearer(hs512))).toBe(401);
    // receipts need view_slab_logistics beside view_slab; warehouses view_slab alone.
    expect(await status(RECEIPTS, bearer(inventoryOnly))).toBe(403);
    expect(await status(WAREHOUSES, bearer(inventoryOnly))).toBe(200);
    expect(await status(RECEIPTS, bearer(valid))).toBe(200);
  });

  it('keys its cache by company: a page one company warmed is a miss for another, then a hit for both', async () => {
    const one = bearer(await token({ company: '7', secret: SECRET }));
    const two = bearer(await token({ company: '8', secret: SECRET }));
    const before = await baselineServed(origin);
    await warmHaproxy(cache.url, [{ path: RECEIPTS, authorization: one.authorization ?? '' }]);
    expect(await baselineServed(origin)).toBe(before + 1);
    const response = await fetch(`${cache.url}${RECEIPTS}`, { headers: two });
    expect(Buffer.from(await response.arrayBuffer()).equals(BODY)).toBe(true);
    expect(await baselineServed(origin)).toBe(before + 2);
    await warmHaproxy(cache.url, [
      { path: RECEIPTS, authorization: one.authorization ?? '' },
      { path: RECEIPTS, authorization: two.authorization ?? '' },
    ]);
    expect(await baselineServed(origin)).toBe(before + 2);
  });

  it('answers every warmed page from its cache during a round, whose CPU is its process’s', async () => {
    const authorization = bearer(await token({ company: '1', secret: SECRET })).authorization ?? '';
    const paths = [RECEIPTS, WAREHOUSES];
    await warmHaproxy(
      cache.url,
      paths.map((path) => ({ path, authorization })),
    );
    const served = await baselineServed(origin);
    const generator = await closedLoopGenerator();
    const round = await measureRound(
      { url: cache.url, pids: () => [cache.launched.pid] },
      {
        url: cache.url,
        connections: 2,
        durationSec: 1,
        requests: paths.map((path) => ({ path, headers: { authorization } })),
      },
      (spec, label) => generator.run(spec, workDir, label),
      'haproxy-test',
    );
    expect(round.load.responses).toBeGreaterThan(30);
    expect(round.load.unexpected).toBe(0);
    expect(await baselineServed(origin)).toBe(served);
    expect(round.serverUsPerRequest).toBeGreaterThan(0);
  });
});
