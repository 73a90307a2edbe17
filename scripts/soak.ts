/**
 * `npm run test:soak`: the system suites (or the files named, of any project) again and again,
 * optionally beside a process that keeps one core busy, and a table of runs and failures per test
 * (a suite that fails one run in four cannot tell a regression from a busy host, and only
 * repetition shows which test it is).
 *
 *   npm run test:soak -- [--runs N] [--busy] [--files a,b,…]
 *
 * --runs N    how many runs in a row (default 10)
 * --busy      a process spinning on one core for the whole soak
 * --files     only the test files whose path contains one of these, system or in-process
 *             (default: every system suite)
 *
 * Exits 1 if any test failed in any run.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';

interface AssertionResult {
  readonly fullName: string;
  readonly status: string;
  readonly duration?: number | null;
}

interface FileResult {
  readonly name: string;
  readonly assertionResults: readonly AssertionResult[];
}

interface Report {
  readonly testResults: readonly FileResult[];
}

interface Tally {
  runs: number;
  failures: number;
  slowestMs: number;
}

function parseOptions(): { runs: number; busy: boolean; files: string[] } {
  const { values } = parseArgs({
    options: {
      runs: { type: 'string', default: '10' },
      busy: { type: 'boolean', default: false },
      files: { type: 'string', default: '' },
    },
    strict: true,
  });
  const runs = Number(values.runs);
  if (!Number.isInteger(runs) || runs < 1 || runs > 1_000)
    throw new Error('--runs must be a whole number from 1 to 1000');
  const files = values.files === '' ? [] : values.files.split(',').filter((file) => file !== '');
  return { runs, busy: values.busy, files };
}

function runSuites(files: readonly string[], outputFile: string): Promise<number> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        'node_modules/vitest/vitest.mjs',
        'run',
        // Named files run in their own project; without any, the system suites.
        ...(files.length === 0 ? ['--project', 'system'] : []),
        '--reporter=dot',
        '--reporter=json',
        `--outputFile.json=${outputFile}`,
        ...files,
      ],
      { stdio: ['ignore', 'ignore', 'inherit'] },
    );
    child.on('exit', (code) => resolve(code ?? 1));
  });
}

function readReport(file: string): Report | undefined {
  try {
    return JSON.parse(readFileSync(file, 'utf8')) as Report;
  } catch {
    return undefined;
  }
}

function spinOneCore(): ChildProcess {
  return spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' });
}

async function main(): Promise<void> {
  const { runs, busy, files } = parseOptions();
  const dir = mkdtempSync(join(tmpdir(), 'slab-soak-'));
  const tallies = new Map<string, Tally>();
  const spinner = busy ? spinOneCore() : undefined;
  const startedAt = Date.now();
  let failedRuns = 0;
  try {
    for (let run = 1; run <= runs; run++) {
      const outputFile = join(dir, `run-${String(run)}.json`);
      const runStart = Date.now();
      const code = await runSuites(files, outputFile);
      const report = readReport(outputFile);
      let failed = report === undefined ? 1 : 0;
      for (const file of report?.testResults ?? []) {
        const path = file.name.slice(file.name.indexOf('test/'));
        for (const test of file.assertionResults) {
          const key = `${path} › ${test.fullName}`;
          const tally = tallies.get(key) ?? { runs: 0, failures: 0, slowestMs: 0 };
          tally.runs += 1;
          if (test.status === 'failed') {
            tally.failures += 1;
            failed += 1;
          }
          tally.slowestMs = Math.max(tally.slowestMs, test.duration ?? 0);
          tallies.set(key, tally);
        }
      }
      if (failed > 0 || code !== 0) failedRuns += 1;
      process.stdout.write(
        `run ${String(run)}/${String(runs)}: ${failed === 0 && code === 0 ? 'green' : `red (${String(failed)} failed)`} in ${String(Math.round((Date.now() - runStart) / 1000))} s${busy ? ', one core busy' : ''}\n`,
      );
    }
  } finally {
    spinner?.kill('SIGKILL');
  }
  const rows = [...tallies].sort(([a, x], [b, y]) => y.failures - x.failures || a.localeCompare(b));
  process.stdout.write('\n| test | runs | failures | slowest |\n|---|---|---|---|\n');
  for (const [name, tally] of rows) {
    process.stdout.write(
      `| ${name} | ${String(tally.runs)} | ${String(tally.failures)} | ${(tally.slowestMs / 1000).toFixed(1)} s |\n`,
    );
  }
  process.stdout.write(
    `\n${String(runs - failedRuns)} of ${String(runs)} runs green${busy ? ' beside a busy core' : ''}, ${String(
      rows.filter(([, t]) => t.failures > 0).length,
    )} tests failed at least once, in ${String(Math.round((Date.now() - startedAt) / 60_000))} min\n`,
  );
  if (failedRuns > 0) process.exitCode = 1;
}

main().catch((error: unknown) => {
  process.stderr.write(`soak: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exitCode = 2;
});
