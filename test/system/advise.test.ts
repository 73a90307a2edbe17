/**
 * `npm run advise` (the compiled `dist/cli/advise.js` its script runs) against a stub admin server:
 * the table it prints of the freshness advice (docs/cache.md#freshness-advice), the token it sends
 * (`ADMIN_TOKEN`, or `--token`) and never prints, the target it passes on, and what it says, with
 * exit code 1, when the operator API refuses, cannot be reached or answers something else.
 */
import { once } from 'node:events';
import { readFileSync } from 'node:fs';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { runNode } from '../helpers/process.js';
import { freePort } from '../support/free-port.js';

const SCRIPT = 'dist/cli/advise.js';
const ADMIN_TOKEN = 'advise-admin-token-of-some-length';

const ADVICE = {
  resources: [
    {
      resource: 'receipts',
      ttl_seconds: 10,
      refreshes_per_minute: 6,
      fills_per_minute: 3,
      unchanged_share: 5 / 6,
      upstream_bytes_per_minute: 1234.5,
      change_interval_seconds: 89.79,
      stale_share_estimate: 0.0536,
      suggested_ttl_seconds: 52,
      last_modified_interval_seconds: 120,
      note: null,
    },
    {
      resource: 'transfers',
      ttl_seconds: 30,
      refreshes_per_minute: 12.25,
      fills_per_minute: 1,
      unchanged_share: 0.2,
      upstream_bytes_per_minute: 250_000,
      change_interval_seconds: 7.3,
      stale_share_estimate: 0.7512,
      suggested_ttl_seconds: 11,
      last_modified_interval_seconds: null,
      note: 'every refresh found a change: changes may come more often than shown',
    },
    {
      resource: 'movements',
      ttl_seconds: 10,
      refreshes_per_minute: 0,
      fills_per_minute: 1,
      unchanged_share: null,
      upstream_bytes_per_minute: 2048,
      change_interval_seconds: null,
      stale_share_estimate: null,
      suggested_ttl_seconds: null,
      last_modified_interval_seconds: null,
      note: 'no refresh seen yet: nothing to judge the TTL by',
    },
    {
      resource: 'warehouses',
      ttl_seconds: 300,
      refreshes_per_minute: 2,
      fills_per_minute: 0.5,
      unchanged_share: 1,
      upstream_bytes_per_minute: 300,
      change_interval_seconds: null,
      stale_share_estimate: 0,
      suggested_ttl_seconds: null,
      last_modified_interval_seconds: null,
      note: 'no change seen: the TTL can grow',
    },
  ],
  window_seconds: 600,
  target_seconds: 5,
};

interface Asked {
  readonly url: string;
  readonly headers: IncomingHttpHeaders;
}

let server: Server;
let adminUrl: string;
let asked: Asked[];
/** What the stub answers next: the advice, or a status and body of the test's choosing. */
let answer: { readonly status: number; readonly body: string };

beforeAll(async () => {
  server = createServer((req, res) => {
    asked.push({ url: req.url ?? '', headers: req.headers });
    const target = new URL(req.url ?? '', 'http://stub').searchParams.get('target');
    const body =
      answer.status === 200 && target !== null
        ? JSON.stringify({ ...JSON.parse(answer.body), target_seconds: Number(target) })
        : answer.body;
    res.writeHead(answer.status, { 'content-type': 'application/json' });
    res.end(body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  adminUrl = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
});

afterAll(async () => {
  server.close();
  await once(server, 'close');
});

beforeEach(() => {
  asked = [];
  answer = { status: 200, body: JSON.stringify(ADVICE) };
});

async function advise(
  args: readonly string[],
  env: Record<string, string> = { ADMIN_TOKEN },
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = runNode(SCRIPT, env, args);
  const code = await child.exited;
  return { code, stdout: child.stdout(), stderr: child.stderr() };
}

describe('npm run advise', () => {
  it('runs the compiled CLI', () => {
    const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts.advise).toMatch(/node dist\/cli\/advise\.js$/);
  });

  it('prints the advice as a table, with the notes under it, asking with ADMIN_TOKEN', async () => {
    const run = await advise(['--admin', adminUrl]);
    expect(run).toMatchObject({ code: 0, stderr: '' });
    expect(run.stdout).toBe(
      [
        `Freshness advice of ${adminUrl}: this replica's fills over the last 10m, target staleness 5s`,
        '',
        'resource    ttl  change every  unchanged %  refreshes/min  KB/min  stale % now  suggested ttl',
        'receipts    10s        1m 30s           83            6.0     1.2          5.4            52s',
        'transfers   30s          7.3s           20           12.3   250.0           75            11s',
        'movements   10s             —            —            0.0     2.0            —              —',
        'warehouses   5m             —          100            2.0     0.3            0              —',
        '',
        'transfers: every refresh found a change: changes may come more often than shown',
        'movements: no refresh seen yet: nothing to judge the TTL by',
        'warehouses: no change seen: the TTL can grow',
        '',
      ].join('\n'),
    );
    expect(asked).toHaveLength(1);
    expect(asked[0]?.url).toBe('/admin/cache/freshness');
    expect(asked[0]?.headers.authorization).toBe(`Bearer ${ADMIN_TOKEN}`);
    expect(run.stdout).not.toContain(ADMIN_TOKEN);
  });

  it('passes --target on, and takes --token over ADMIN_TOKEN', async () => {
    const run = await advise(['--admin', adminUrl, '--target', '30', '--token', 'another-admin-token']);
    expect(run.code).toBe(0);
    expect(run.stdout.split('\n')[0]).toContain('target staleness 30s');
    expect(asked[0]?.url).toBe('/admin/cache/freshness?target=30');
    expect(asked[0]?.headers.authorization).toBe('Bearer another-admin-token');
  });

  it('says when nothing has been filled yet', async () => {
    answer = { status: 200, body: JSON.stringify({ ...ADVICE, resources: [], window_seconds: 60 }) };
    const run = await advise(['--admin', adminUrl]);
    expect(run.code).toBe(0);
    expect(run.stdout).toBe(
      `Freshness advice of ${adminUrl}: this replica's fills over the last 1m, target staleness 5s\nNo fills yet: nothing to advise.\n`,
    );
  });

  it("names the operator API's refusal, exit 1, and never prints the token", async () => {
    answer = {
      status: 401,
      body: JSON.stringify({ code: 'unauthenticated', detail: 'A valid admin token is required.', status: 401 }),
    };
    const run = await advise(['--admin', adminUrl]);
    expect(run.code).toBe(1);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      'slab-ops-proxy advise: the operator API answered 401 unauthenticated: A valid admin token is required.\n',
    );
    expect(`${run.stdout}${run.stderr}`).not.toContain(ADMIN_TOKEN);
  });

  it('says so when the answer is not freshness advice, or the admin port cannot be reached', async () => {
    answer = { status: 200, body: '{"status":"ok"}' };
    const odd = await advise(['--admin', adminUrl]);
    expect(odd.code).toBe(1);
    expect(odd.stderr).toBe(`slab-ops-proxy advise: ${adminUrl} did not answer with freshness advice\n`);
    const closed = `http://127.0.0.1:${String(await freePort())}`;
    const unreachable = await advise(['--admin', closed]);
    expect(unreachable.code).toBe(1);
    expect(unreachable.stderr).toMatch(new RegExp(`^slab-ops-proxy advise: cannot reach ${closed}: .*ECONNREFUSED`));
    expect(unreachable.stderr).not.toContain(ADMIN_TOKEN);
  });

  it('prints its usage, exit 2, without a token or with a bad command line', async () => {
    const tokenless = await advise(['--admin', adminUrl], {});
    expect(tokenless.code).toBe(2);
    expect(tokenless.stderr).toContain('no admin token: set ADMIN_TOKEN or --token');
    expect(tokenless.stderr).toContain('usage: npm run -s advise');
    expect((await advise(['--admin', 'not a url'])).code).toBe(2);
    expect((await advise(['--bogus'])).code).toBe(2);
    expect(asked).toEqual([]);
  });
});
