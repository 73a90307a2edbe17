/**
 * The entry points as a newcomer runs them: `npm start` with nothing set (embedded default, the
 * printed `curl` line must work when pasted), the start's refusals, `npm run token`, and
 * `npm run sandbox` behind a proxy started in production mode, each a real process.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { decodeJwt } from 'jose';
import { afterAll, describe, expect, it } from 'vitest';
import { createTokenVerifier } from '../../src/auth/verify-token.js';
import { DEV_SECRET } from '../../src/dev/dev-credentials.js';
import { getWithToken } from '../helpers/http.js';
import { type RunningProcess, runNode } from '../helpers/process.js';

const run = promisify(execFile);
const QUIET_PORTS = { PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1' };

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
    for (const name of ['JWT_JWKS_URL', 'JWT_PUBLIC_KEY', 'JWT_PUBLIC_KEY_FILE', 'JWT_SECRET']) expect(proxy.stderr()).toContain(name);
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
      '--company', '1',
      '--permissions', 'view_slab,view_slab_logistics',
      '--employee', '7',
      '--employee-permissions', 'view_slab',
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
    proxy = runNode('dist/main.js', { ...QUIET_PORTS, UPSTREAM_URL: sandboxUrl, JWT_SECRET: secret, LOG_LEVEL: 'info' });
    const [, port = ''] = await proxy.waitFor(/"port":(\d+)/);
    const { stdout: minted } = await run(process.execPath, ['dist/cli/token.js', '--company', '2'], { env: { ...process.env, JWT_SECRET: secret } });
    const res = await getWithToken(`http://127.0.0.1:${port}`, '/api/slab/v1/operations/warehouses', minted.trim());
    expect(res.status).toBe(200);
    const direct = await getWithToken(sandboxUrl, '/api/slab/v1/operations/warehouses', minted.trim());
    expect(res.body.equals(direct.body)).toBe(true);
    // A dev-secret token is not accepted by a proxy with the operator's key.
    const { stdout: devToken } = await run(process.execPath, ['dist/cli/token.js', '--company', '2'], { env: { PATH: process.env.PATH ?? '' } });
    expect((await getWithToken(`http://127.0.0.1:${port}`, '/api/slab/v1/operations/warehouses', devToken.trim())).status).toBe(401);
  });
});
