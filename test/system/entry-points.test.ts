/**
 * The entry points as a newcomer runs them: `npm start` with nothing set (embedded default, the
 * printed `curl` line must work when pasted), the start's refusals, `npm run token`, and
 * `npm run sandbox` behind a proxy started in production mode, each a real process.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { promisify } from 'node:util';
import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTokenVerifier } from '../../src/auth/verify-token.js';
import { ALL_PERMISSIONS } from '../../src/catalog/resources.js';
import { DEV_SECRET } from '../../src/cli/dev-credentials.js';
import { ENV_VARIABLES } from '../../src/config/load.js';
import { getWithToken, send } from '../helpers/http.js';
import { type RunningProcess, runNode } from '../helpers/process.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';

const run = promisify(execFile);
const QUIET_PORTS = { PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1' };
const VERSION = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
const ENTRY_POINTS = [
  ['dist/main.js', 'slab-ops-proxy'],
  ['dist/sandbox/main.js', 'slab-ops-proxy sandbox'],
  ['dist/cli/token.js', 'slab-ops-proxy token'],
] as const;

/** Runs a command to its end: exit code and output (execFile rejects on a non-zero exit). */
async function runToEnd(
  args: readonly string[],
  options: { readonly env?: NodeJS.ProcessEnv; readonly cwd?: string } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  try {
    const { stdout, stderr } = await run(process.execPath, [...args], {
      env: options.env ?? { PATH: process.env.PATH ?? '' },
      ...(options.cwd !== undefined && { cwd: options.cwd }),
    });
    return { code: 0, stdout, stderr };
  } catch (error) {
    const failed = error as { code?: unknown; stdout?: unknown; stderr?: unknown };
    return {
      code: typeof failed.code === 'number' ? failed.code : -1,
      stdout: String(failed.stdout),
      stderr: String(failed.stderr),
    };
  }
}

async function readyz(adminPort: string): Promise<Record<string, unknown>> {
  const res = await send(`http://127.0.0.1:${adminPort}`, '/readyz');
  return res.json() as Record<string, unknown>;
}

describe('--help and --version on every command', () => {
  it.each(ENTRY_POINTS)('%s --help prints the usage and exits 0 without starting anything', async (script) => {
    const result = await runToEnd([script, '--help']);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/^usage: /);
    expect(result.stdout).not.toMatch(/listening/);
    expect(result.stderr).toBe('');
  });

  it.each(ENTRY_POINTS)('%s --version prints "%s <version>"', async (script, name) => {
    const result = await runToEnd([script, '--version']);
    expect(result).toMatchObject({ code: 0, stdout: `${name} ${VERSION}\n` });
  });

  it.each(ENTRY_POINTS)(
    '%s refuses an unknown option or an argument with exit code 2 and the usage',
    async (script) => {
      for (const args of [['--frobnicate'], ['serve']]) {
        const result = await runToEnd([script, ...args]);
        expect(result.code).toBe(2);
        expect(result.stdout).toBe('');
        expect(result.stderr).toContain('usage: ');
      }
    },
  );

  it('the main help names every variable the start reads', async () => {
    const { stdout } = await runToEnd(['dist/main.js', '--help']);
    // The one list the configuration reads from: a new variable cannot be left out of the help.
    for (const name of ENV_VARIABLES) expect(stdout).toContain(name);
    expect(stdout).toContain(resolve('config/default.yaml'));
  });
});

describe('npm start with nothing set (the embedded default)', () => {
  let proxy: RunningProcess;
  afterAll(() => proxy.stop('SIGKILL'));

  it('prints a token and a curl line that works when pasted', async () => {
    proxy = runNode('dist/main.js', QUIET_PORTS);
    const [line] = await proxy.waitFor(/curl -s .*\n/);
    const { stdout } = await run('sh', ['-c', line.trim()]);
    const page = JSON.parse(stdout) as { data: unknown[]; meta: { has_more: boolean } };
    expect(page.data.length).toBeGreaterThan(0);
    expect(page.meta.has_more).toBe(true);
  });

  it('stops with exit code 0 on SIGTERM', async () => {
    expect(await proxy.stop('SIGTERM')).toBe(0);
  });
});

describe('the start refuses to run half-configured', () => {
  it('UPSTREAM_URL without a key source names the variables to set', async () => {
    const proxy = runNode('dist/main.js', { ...QUIET_PORTS, UPSTREAM_URL: 'http://127.0.0.1:9' });
    expect(await proxy.exited).toBe(2);
    for (const name of ['JWT_JWKS_URL', 'JWT_PUBLIC_KEY', 'JWT_PUBLIC_KEY_FILE', 'JWT_SECRET'])
      expect(proxy.stderr()).toContain(name);
  });

  it('a config file with an unknown key names the key', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'slab-config-'));
    const file = join(dir, 'ops.yaml');
    writeFileSync(file, 'cache:\n  defaults:\n    tll: 5\n');
    const proxy = runNode('dist/main.js', { ...QUIET_PORTS, CONFIG_FILE: file });
    expect(await proxy.exited).toBe(2);
    expect(proxy.stderr()).toContain('cache.defaults.tll');
  });

  it('a bad environment value names the variable', async () => {
    const proxy = runNode('dist/main.js', { ...QUIET_PORTS, PORT: 'eighty' });
    expect(await proxy.exited).toBe(2);
    expect(proxy.stderr()).toContain('PORT');
  });
});

describe('npm run token', () => {
  it('mints a token the proxy accepts, with the claims asked for', async () => {
    const { stdout } = await run(process.execPath, [
      'dist/cli/token.js',
      '--company',
      '1',
      '--permissions',
      'view_slab,view_slab_logistics',
      '--employee',
      '7',
      '--employee-permissions',
      'view_slab',
    ]);
    const minted = stdout.trim();
    const verifier = createTokenVerifier({ keys: { kind: 'secret', secret: DEV_SECRET }, cache: false });
    const principal = await verifier.verify(minted);
    expect(principal.company).toBe('1');
    expect([...principal.permissions]).toEqual(['view_slab', 'view_slab_logistics']);
    expect(principal.employee?.id).toBe('7');
    expect([...(principal.employee?.permissions ?? [])]).toEqual(['view_slab']);
    expect(decodeJwt(minted).exp).toBeGreaterThan(Date.now() / 1000);
  });

  it('refuses to run without --company', async () => {
    await expect(run(process.execPath, ['dist/cli/token.js'])).rejects.toMatchObject({ code: 2 });
  });

  it.each([
    ['company 0', ['--company', '0'], '--company'],
    ['a company with leading zeros', ['--company', '007'], '--company'],
    ['a company past 2^53-1', ['--company', '9007199254740993'], '--company'],
    ['a company outside the text grammar', ['--company', 'acme corp'], '--company'],
    ['an employee id outside the grammar', ['--company', '1', '--employee', '0'], '--employee'],
    ['a misspelt permission', ['--company', '1', '--permissions', 'view_slab,view_slabb'], 'view_slabb'],
    [
      'a misspelt employee permission',
      ['--company', '1', '--employee', '7', '--employee-permissions', 'view_slabb'],
      'view_slabb',
    ],
    [
      'employee permissions without an employee',
      ['--company', '1', '--employee-permissions', 'view_slab'],
      '--employee',
    ],
    ['a ttl that is not whole seconds', ['--company', '1', '--ttl', '1e3'], '--ttl'],
    ['a claim the proxy would refuse (an empty sub)', ['--company', '1', '--sub', ''], 'sub'],
  ])('refuses %s: exit code 2, no token, the reason named', async (_case, args, named) => {
    const result = await runToEnd(['dist/cli/token.js', ...args]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toContain(named);
  });

  it('mints a text company, and an unknown permission on purpose with --allow-unknown-permissions', async () => {
    const text = await runToEnd(['dist/cli/token.js', '--company', 'globex']);
    expect(decodeJwt(text.stdout.trim()).company_id).toBe('globex');
    const extra = await runToEnd([
      'dist/cli/token.js',
      '--company',
      '1',
      '--permissions',
      'view_slab,beta_feature',
      '--allow-unknown-permissions',
    ]);
    expect(extra.code).toBe(0);
    expect(decodeJwt(extra.stdout.trim()).permissions).toEqual(['view_slab', 'beta_feature']);
    const all = await runToEnd(['dist/cli/token.js', '--company', '1']);
    expect(decodeJwt(all.stdout.trim()).permissions).toEqual(ALL_PERMISSIONS);
  });
});

describe('a truthful start', () => {
  let redis: RedisServer;
  beforeAll(async () => {
    redis = await startRedis();
  });
  afterAll(() => redis.stop());

  it('from another working directory: the built-in config is the package’s, and the curl line works', async () => {
    const elsewhere = mkdtempSync(join(tmpdir(), 'slab-cwd-'));
    const proxy = runNode(resolve('dist/main.js'), QUIET_PORTS, [], { cwd: elsewhere });
    try {
      const [line] = await proxy.waitFor(/curl -s .*\n/);
      expect(proxy.stdout()).toContain('cache store: in-process (one replica)');
      const { stdout } = await run('sh', ['-c', line.trim()]);
      expect((JSON.parse(stdout) as { data: unknown[] }).data.length).toBeGreaterThan(0);
    } finally {
      await proxy.stop('SIGKILL');
    }
  });

  it('the embedded default with REDIS_URL names Redis, as /readyz does', async () => {
    const proxy = runNode('dist/main.js', { ...QUIET_PORTS, REDIS_URL: `${redis.url}/3` });
    try {
      const [, adminPort = ''] = await proxy.waitFor(/admin on port (\d+)/);
      await proxy.waitFor(/curl -s/);
      expect(proxy.stdout()).toContain(`cache store: Redis at 127.0.0.1:${redis.port} (database 3)`);
      expect(proxy.stdout()).toMatch(/upstream: {4}the embedded sandbox at http:\/\/127\.0\.0\.1:\d+/);
      expect(proxy.stdout()).toContain('token keys:  the development secret');
      expect(proxy.stdout()).not.toContain('in-process');
      expect(await readyz(adminPort)).toMatchObject({ cache: 'redis' });
    } finally {
      await proxy.stop('SIGKILL');
    }
  });

  it('a production start logs the ports, the upstream, the store and the key source, no credentials', async () => {
    const secret = 'a production-like secret of at least thirty-two bytes';
    const proxy = runNode('dist/main.js', {
      ...QUIET_PORTS,
      UPSTREAM_URL: 'http://reader:upstream-password@127.0.0.1:9/base',
      JWT_SECRET: secret,
      REDIS_URL: redis.url,
      ADMIN_TOKEN: 'entry-points-admin-token-0123456789',
      LOG_LEVEL: 'info',
    });
    try {
      await proxy.waitFor(/"msg":"slab-ops-proxy listening"/);
      const line = proxy
        .stdout()
        .split('\n')
        .map((text) => (text.startsWith('{') ? (JSON.parse(text) as Record<string, unknown>) : {}))
        .find((logged) => logged.msg === 'slab-ops-proxy listening');
      expect(line).toMatchObject({
        port: expect.any(Number),
        adminPort: expect.any(Number),
        operatorApi: true,
        upstream: 'http://127.0.0.1:9/base',
        store: `Redis at 127.0.0.1:${redis.port} (database 0)`,
        keys: 'JWT_SECRET (HMAC)',
      });
      expect(await readyz(String(line?.adminPort))).toMatchObject({ cache: 'redis' });
      for (const secretText of ['upstream-password', secret, 'entry-points-admin-token'])
        expect(proxy.stdout()).not.toContain(secretText);
    } finally {
      await proxy.stop('SIGKILL');
    }
  });
});

describe('npm run sandbox behind a proxy in production mode (separate processes)', () => {
  const secret = 'a production-like secret of at least thirty-two bytes';
  let sandbox: RunningProcess;
  let proxy: RunningProcess;
  afterAll(async () => {
    await proxy.stop('SIGKILL');
    await sandbox.stop('SIGKILL');
  });

  it('serves reads through the proxy with the operator key', async () => {
    sandbox = runNode('dist/sandbox/main.js', { SANDBOX_PORT: '0', JWT_SECRET: secret });
    const [, sandboxUrl = ''] = await sandbox.waitFor(/listening on (http:\/\/\S+)/);
    proxy = runNode('dist/main.js', {
      ...QUIET_PORTS,
      UPSTREAM_URL: sandboxUrl,
      JWT_SECRET: secret,
      LOG_LEVEL: 'info',
    });
    const [, port = ''] = await proxy.waitFor(/"port":(\d+)/);
    const { stdout: minted } = await run(process.execPath, ['dist/cli/token.js', '--company', '2'], {
      env: { ...process.env, JWT_SECRET: secret },
    });
    const res = await getWithToken(`http://127.0.0.1:${port}`, '/api/slab/v1/operations/warehouses', minted.trim());
    expect(res.status).toBe(200);
    const direct = await getWithToken(sandboxUrl, '/api/slab/v1/operations/warehouses', minted.trim());
    expect(res.body.equals(direct.body)).toBe(true);
    // A dev-secret token is not accepted by a proxy with the operator's key.
    const { stdout: devToken } = await run(process.execPath, ['dist/cli/token.js', '--company', '2'], {
      env: { PATH: process.env.PATH ?? '' },
    });
    expect(
      (await getWithToken(`http://127.0.0.1:${port}`, '/api/slab/v1/operations/warehouses', devToken.trim())).status,
    ).toBe(401);
  });
});
