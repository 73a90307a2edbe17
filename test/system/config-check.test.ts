/**
 * `npm run config:check FILE` (the compiled `dist/cli/config-check.js` its script runs): `ok` and
 * exit 0 for a good file; for a bad one, exit 2 and the very line `npm start` prints for that
 * file as `CONFIG_FILE` (the start itself is run to compare).
 */
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { runNode } from '../helpers/process.js';
import { replicaConfig } from '../helpers/replicas.js';

async function run(
  script: string,
  env: Record<string, string>,
  args: readonly string[] = [],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = runNode(script, env, args);
  const code = await child.exited;
  return { code, stdout: child.stdout(), stderr: child.stderr() };
}

describe('npm run config:check', () => {
  it('runs the compiled checker', () => {
    const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;
    expect(scripts['config:check']).toMatch(/node dist\/cli\/config-check\.js$/);
  });

  it.each(['config/default.yaml', 'config/loadtest.yaml', 'deploy/kubernetes/base/config.yaml'])(
    'says ok for %s',
    async (file) => {
      expect(await run('dist/cli/config-check.js', {}, [file])).toEqual({ code: 0, stdout: 'ok\n', stderr: '' });
    },
  );

  it('names the key and exits 2, with the line the start prints for the same file', async () => {
    const file = replicaConfig('cache:\n  defaults: { tll: 5 }\n');
    const checked = await run('dist/cli/config-check.js', {}, [file]);
    expect(checked.code).toBe(2);
    expect(checked.stdout).toBe('');
    expect(checked.stderr).toContain('cache.defaults.tll: unknown key');
    const started = await run('dist/main.js', { CONFIG_FILE: file, PORT: '0', ADMIN_PORT: '0', HOST: '127.0.0.1' });
    expect(started.code).toBe(2);
    expect(checked.stderr).toBe(started.stderr);
  });

  it('exits 2 with its usage without a file, and names an unreadable one', async () => {
    const usage = await run('dist/cli/config-check.js', {});
    expect(usage.code).toBe(2);
    expect(usage.stderr).toMatch(/^usage: npm run config:check FILE/);
    const missing = await run('dist/cli/config-check.js', {}, ['/nonexistent/config.yaml']);
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('cannot read /nonexistent/config.yaml');
  });
});
