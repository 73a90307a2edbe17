/**
 * The runtime check (scripts/check-node.mjs): a Node.js outside package.json's `engines` stops
 * every npm script that runs the proxy, its CLIs or its tests before anything else, with exit code
 * 2 and one message naming the Node.js needed, the one found and the README's line that runs the
 * command on the right one; a Node.js inside says nothing. The function is judged with fake
 * versions; the program with `--node-version`, on this Node and on the machine's own `node` when
 * it is another one.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { accessSync, constants, readFileSync, realpathSync } from 'node:fs';
import { delimiter, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import {
  enginesRange,
  lowestMajor,
  npmCommand,
  RUNTIME_EXIT_CODE,
  runtimeProblem,
  satisfies,
} from '../../scripts/check-node.mjs';

const SCRIPT = 'scripts/check-node.mjs';
const CHECK = `node ${SCRIPT}`;
const PACKAGE = readFileSync('package.json', 'utf8');
const RANGE = enginesRange(PACKAGE);
const SCRIPTS = (JSON.parse(PACKAGE) as { scripts: Record<string, string> }).scripts;

/** Runs the check as npm runs it for `event` (e.g. `prestart`), on the given `node`. */
function runCheck(node: string, event: string, args: readonly string[] = []) {
  const env: NodeJS.ProcessEnv = { ...process.env, npm_lifecycle_event: event };
  const result = spawnSync(node, [SCRIPT, ...args], { env, encoding: 'utf8' });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

function isExecutable(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

/** The first `node` on PATH that is not the one running the tests (the machine's own); this one if none. */
function machineNode(): string {
  const running = realpathSync(process.execPath);
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    const candidate = join(dir, 'node');
    if (dir !== '' && isExecutable(candidate) && realpathSync(candidate) !== running) return candidate;
  }
  return process.execPath;
}

describe('the range package.json gives', () => {
  it('is read from engines.node, the one definition', () => {
    expect(RANGE).toBe((JSON.parse(PACKAGE) as { engines: { node: string } }).engines.node);
    expect(() => enginesRange('{"engines":{}}')).toThrow('package.json has no engines.node');
  });

  it('admits Node.js 24 from 24.11 on, and no other major', () => {
    for (const version of ['24.11.0', '24.22.3', 'v24.11.1', '24.12.0-pre'])
      expect(satisfies(version, RANGE), version).toBe(true);
    for (const version of ['24.10.9', '25.0.0', '26.1.0', '22.21.0', '20.20.2', '18.20.8'])
      expect(satisfies(version, RANGE), version).toBe(false);
    expect(satisfies(process.versions.node, RANGE)).toBe(true); // the tests run on the runtime of record
  });

  it('names Node.js 24 as the one to fetch, as the README does', () => {
    expect(lowestMajor(RANGE)).toBe(24);
    const firstScreen = readFileSync('README.md', 'utf8').split('\n').slice(0, 40).join('\n');
    expect(firstScreen.replace(/\s+/g, ' ')).toContain(`npx -y -p node@${lowestMajor(RANGE)} -c '…'`);
  });
});

describe('satisfies and lowestMajor, on other ranges', () => {
  it('compare on the parts a comparator gives, as npm does', () => {
    expect(satisfies('24.5.0', '>24')).toBe(false);
    expect(satisfies('25.0.0', '>24')).toBe(true);
    expect(satisfies('24.9.9', '<=24')).toBe(true);
    expect(satisfies('24.9.9', '24')).toBe(true);
    expect(satisfies('24.9.9', '=24.9.8')).toBe(false);
    expect(satisfies('22.12.0', '>=20.19 <21 || >=22.12')).toBe(true);
    expect(satisfies('21.0.0', '>=20.19 <21 || >=22.12')).toBe(false);
  });

  it('find the lowest major admitted', () => {
    expect(lowestMajor('>=22.12 <23 || >=24')).toBe(22);
    expect(lowestMajor('>24')).toBe(25);
    expect(lowestMajor('>24.1')).toBe(24);
    expect(lowestMajor('=26.0.1')).toBe(26);
  });

  it('refuse a range or a version they cannot read, rather than guess', () => {
    expect(() => satisfies('24.1.0', '^24')).toThrow('cannot read "^24"');
    expect(() => satisfies('24.1.0', '>=24 ||')).toThrow('an empty alternative');
    expect(() => lowestMajor('<25')).toThrow('no lowest version');
    expect(() => satisfies('twenty', RANGE)).toThrow('"twenty" is not a Node.js version');
  });
});

describe('the message', () => {
  it('names the command a person typed', () => {
    expect(npmCommand('prestart')).toBe('npm start');
    expect(npmCommand('pretest')).toBe('npm test');
    expect(npmCommand('pretoken')).toBe('npm run token');
    expect(npmCommand('pretest:soak')).toBe('npm run test:soak');
    expect(npmCommand('preconfig:check')).toBe('npm run config:check');
    expect(npmCommand(undefined)).toBeUndefined();
  });

  it('says what is needed, what was found, and the one line that runs the command', () => {
    const facts = { execPath: '/usr/bin/node', range: RANGE, command: 'npm start' };
    expect(runtimeProblem({ ...facts, found: '20.20.2' })).toBe(
      'slab-ops-proxy: needs Node.js >=24.11 <25 (package.json "engines"), found 20.20.2 (/usr/bin/node). ' +
        "Run `npm start` on Node.js 24 with:\n  npx -y -p node@24 -c 'npm start'",
    );
    expect(runtimeProblem({ ...facts, found: '24.11.0' })).toBeUndefined();
    expect(runtimeProblem({ ...facts, command: undefined, found: '22.1.0' })).toMatch(
      /Run the command on Node\.js 24 with:\n {2}npx -y -p node@24 -c '…'$/,
    );
  });
});

describe('package.json', () => {
  /** The scripts that run the program, its CLIs, the bench or vitest. */
  const guarded = Object.keys(SCRIPTS).filter((name) =>
    /\bnode (?:--\S+ )*dist(?:-bench)?\/|\bvitest\b/.test(SCRIPTS[name] ?? ''),
  );

  it('checks the runtime first in the pre-script of each one that runs the code', () => {
    expect(guarded).toEqual(
      expect.arrayContaining(['start', 'sandbox', 'token', 'test', 'bench', 'loadtest', 'docs', 'config:check']),
    );
    expect(
      guarded.filter((name) => !SCRIPTS[`pre${name}`]?.startsWith(`${CHECK} && `) && SCRIPTS[`pre${name}`] !== CHECK),
    ).toEqual([]);
  });

  it('still builds before the proxy, the sandbox and the token CLI start', () => {
    for (const name of ['prestart', 'presandbox', 'pretoken'])
      expect(SCRIPTS[name]).toBe(`${CHECK} && npm run --silent build`);
  });
});

describe('the program', () => {
  it('stops an older Node.js with exit code 2 and the message alone', () => {
    const run = runCheck(process.execPath, 'prestart', ['--node-version', '20.20.2']);
    expect(run.status).toBe(RUNTIME_EXIT_CODE);
    expect(run.stdout).toBe('');
    expect(run.stderr).toBe(
      `${runtimeProblem({ found: '20.20.2', execPath: process.execPath, range: RANGE, command: 'npm start' })}\n`,
    );
    expect(run.stderr).not.toMatch(/^\s+at /m); // no stack trace
  });

  it('says nothing on this Node.js, the runtime of record', () => {
    expect(runCheck(process.execPath, 'pretest')).toEqual({ status: 0, stdout: '', stderr: '' });
  });

  it('refuses a command line it cannot read', () => {
    const run = runCheck(process.execPath, 'pretest', ['--node-version']);
    expect(run.status).toBe(RUNTIME_EXIT_CODE);
    expect(run.stderr).toBe('usage: node scripts/check-node.mjs [--node-version X.Y.Z]\n');
  });

  const node = machineNode();
  it(`judges the machine's own node (${node}) as the function does`, () => {
    const [found = '', execPath = ''] = execFileSync(node, ['-p', 'process.versions.node + "\\n" + process.execPath'], {
      encoding: 'utf8',
    })
      .trim()
      .split('\n');
    const problem = runtimeProblem({ found, execPath, range: RANGE, command: 'npm test' });
    // Node 20 on a machine that has it: the message; Node 24 alone: silence.
    expect(runCheck(node, 'pretest')).toEqual({
      status: problem === undefined ? 0 : RUNTIME_EXIT_CODE,
      stdout: '',
      stderr: problem === undefined ? '' : `${problem}\n`,
    });
  });
});
