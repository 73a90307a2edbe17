/**
 * The tools check (scripts/check-tools.mjs): before any test runs, `npm test` stops on a machine
 * without a program the suites use, with exit code 2, each missing tool and what it is for, and the
 * one `apt-get install` line; with every tool there it says nothing. `.ci/run` installs from the
 * same list. The lookup is judged on directories of fake programs made here; the program on this
 * machine, where CI has installed every tool.
 */
import { spawnSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { missingTools, TOOLS, TOOLS_EXIT_CODE, toolsProblem } from '../../scripts/check-tools.mjs';

const SCRIPT = 'scripts/check-tools.mjs';
const dirs: string[] = [];

/** A directory holding fake programs of these names (executable unless `notExecutable`). */
function binDir(names: readonly string[], notExecutable: readonly string[] = []): string {
  const dir = mkdtempSync(join(tmpdir(), 'check-tools-'));
  dirs.push(dir);
  for (const name of [...names, ...notExecutable]) {
    writeFileSync(join(dir, name), '#!/bin/sh\n');
    chmodSync(join(dir, name), notExecutable.includes(name) ? 0o644 : 0o755);
  }
  return dir;
}

afterAll(() => {
  for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
});

const COMMANDS = TOOLS.filter((tool) => tool.command !== undefined);

describe('the lookup', () => {
  it('finds a command in any directory of PATH or in the system directories, and only an executable one', () => {
    const names = COMMANDS.map((tool) => tool.command ?? '');
    const first = binDir(names.slice(0, 2));
    const second = binDir(names.slice(2, 4), names.slice(4, 5));
    const system = binDir(names.slice(5));
    const missing = missingTools([first, '', second].join(delimiter), [system], COMMANDS);
    expect(missing.map((tool) => tool.name)).toEqual([COMMANDS[4]?.name]);
    expect(missingTools(first, [], COMMANDS).map((tool) => tool.name)).toEqual(
      COMMANDS.slice(2).map((tool) => tool.name),
    );
  });

  it('looks for a tool with a fixed path there, and nowhere else', () => {
    const onPath = binDir(['chromium']);
    const tool = { name: 'chromium', file: join(onPath, 'not-here'), package: 'chromium', purpose: 'a browser' };
    expect(missingTools(onPath, [], [tool])).toEqual([tool]);
    expect(missingTools('', [], [{ ...tool, file: join(onPath, 'chromium') }])).toEqual([]);
  });

  it("covers every program the suites start: Redis, promtool, Debian's Chromium, wrk, nginx, HAProxy, curl", () => {
    expect(TOOLS.map((tool) => tool.name)).toEqual([
      'redis-server',
      'promtool',
      'chromium',
      'wrk',
      'nginx',
      'haproxy',
      'curl',
    ]);
    // The browser the load test's suite drives is the one checked (test/helpers/chromium.ts).
    expect(readFileSync('test/helpers/chromium.ts', 'utf8')).toContain(
      `'${TOOLS.find((tool) => tool.name === 'chromium')?.file ?? '?'}'`,
    );
  });
});

describe('the message', () => {
  it('names each missing tool with its purpose, then one install line of their packages', () => {
    const missing = TOOLS.filter((tool) => ['redis-server', 'promtool', 'wrk'].includes(tool.name));
    expect(toolsProblem(missing)).toBe(
      [
        'slab-ops-proxy: the tests need programs this machine does not have:',
        '  redis-server: the Redis servers the tests start',
        '  promtool: checks the alert rules',
        "  wrk: the bench's load generator",
        'Install them (Debian, as root) with:',
        '  apt-get install -y --no-install-recommends redis-server prometheus wrk',
      ].join('\n'),
    );
  });

  it('names a package once, however many tools it brings', () => {
    const redis = { name: 'redis-server', command: 'redis-server', package: 'redis-server', purpose: 'a server' };
    const twice = [redis, { ...redis, name: 'redis-cli', command: 'redis-cli' }];
    expect(toolsProblem(twice).split('\n').at(-1)).toBe('  apt-get install -y --no-install-recommends redis-server');
  });
});

describe('the program', () => {
  it('runs before every command that runs the suites', () => {
    const scripts = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: Record<string, string> }).scripts;
    for (const name of ['pretest', 'precoverage', 'pretest:soak'])
      expect(scripts[name], name).toBe('node scripts/check-node.mjs && node scripts/check-tools.mjs');
    expect(readFileSync('.ci/run', 'utf8')).toContain('"$(node scripts/check-tools.mjs --packages)"');
  });

  it("is what the README's first screen names: every tool, and the install line for all of them", () => {
    const readme = readFileSync('README.md', 'utf8').replace(/\s+/g, ' ');
    const firstScreen = readme.slice(0, readme.indexOf('`npm start` with nothing set'));
    for (const tool of TOOLS) expect(firstScreen, tool.name).toContain(tool.file ?? `\`${tool.command ?? ''}\``);
    const installLine = toolsProblem(TOOLS).split('\n').at(-1)?.trim() ?? '?';
    expect(firstScreen).toContain(installLine);
  });

  it('says nothing and exits 0 on this machine, where every tool is installed', () => {
    const result = spawnSync(process.execPath, [SCRIPT], { encoding: 'utf8' });
    expect({ status: result.status, stdout: result.stdout, stderr: result.stderr }).toEqual({
      status: 0,
      stdout: '',
      stderr: '',
    });
    const packages = spawnSync(process.execPath, [SCRIPT, '--packages'], { encoding: 'utf8' });
    expect({ status: packages.status, stdout: packages.stdout }).toEqual({ status: 0, stdout: '' });
  });

  it('refuses arguments it does not know, with exit code 2', () => {
    const result = spawnSync(process.execPath, [SCRIPT, '--bogus'], { encoding: 'utf8' });
    expect(result.status).toBe(TOOLS_EXIT_CODE);
    expect(result.stderr).toBe('usage: node scripts/check-tools.mjs [--packages]\n');
  });
});
