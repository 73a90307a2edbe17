/**
 * Which generator measures what: closed loop (as fast as the server answers) with wrk when it
 * is installed, else autocannon (BENCH_GENERATOR=autocannon forces it, to compare); paced (open
 * loop, a fixed rate) with the repository's own generator. Each runs in its own process on the
 * client's CPU.
 */

import { writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { envChoice } from '../env.js';
import { CLIENT_CPU, commandPath, launch, ROOT } from '../processes.js';
import { type LoadResult, type LoadSpec, parseLoadResult } from './types.js';
import { runWrk, wrkVersion } from './wrk.js';

export interface ClosedLoopGenerator {
  readonly kind: 'wrk' | 'autocannon';
  /** e.g. "wrk 4.1.0". */
  readonly label: string;
  /** Why it is not wrk, when it is not. */
  readonly note: string | undefined;
  run(spec: LoadSpec, workDir: string, label: string): Promise<LoadResult>;
}

const WORKER = join(ROOT, 'dist-bench', 'bench', 'lib', 'load', 'worker.js');

async function runWorker(
  mode: '--autocannon' | '--paced',
  spec: LoadSpec,
  workDir: string,
  label: string,
): Promise<LoadResult> {
  const specFile = join(workDir, `load-${label.replace(/[^A-Za-z0-9_-]/g, '_')}.json`);
  writeFileSync(specFile, JSON.stringify(spec));
  const worker = launch(`load (${label})`, process.execPath, [WORKER, mode, specFile], {
    env: { PATH: process.env.PATH ?? '' },
    cpu: CLIENT_CPU,
    stdout: 'pipe',
  });
  await worker.exited;
  const line = worker.output().trim().split('\n').pop() ?? '';
  if (worker.child.exitCode !== 0 || !line.startsWith('{'))
    throw new Error(`load worker failed (${String(worker.child.exitCode)}): ${worker.errors().slice(-800)}`);
  return parseLoadResult(line);
}

function autocannonVersion(): string {
  const manifest: unknown = createRequire(import.meta.url)('autocannon/package.json');
  return typeof manifest === 'object' &&
    manifest !== null &&
    'version' in manifest &&
    typeof manifest.version === 'string'
    ? manifest.version
    : 'unknown';
}

/** wrk when on PATH (unless BENCH_GENERATOR=autocannon), else autocannon, saying why. */
export async function closedLoopGenerator(): Promise<ClosedLoopGenerator> {
  const wanted = envChoice('BENCH_GENERATOR', ['wrk', 'autocannon']);
  const wrk = commandPath('wrk');
  if (wanted === 'wrk' && wrk !== undefined) {
    return {
      kind: 'wrk',
      label: `wrk ${await wrkVersion(wrk)}`,
      note: undefined,
      run: (spec, workDir, label) => runWrk(wrk, spec, workDir, label),
    };
  }
  return {
    kind: 'autocannon',
    label: `autocannon ${autocannonVersion()}`,
    note:
      wanted === 'autocannon'
        ? 'BENCH_GENERATOR=autocannon'
        : 'wrk is not installed (Debian: apt-get install wrk): autocannon instead, which saturates its own core first and so flatters ratios to the bare server',
    run: (spec, workDir, label) => runWorker('--autocannon', spec, workDir, label),
  };
}

/** The paced open-loop generator at `spec.overallRate`. */
export function runPacedLoad(spec: LoadSpec, workDir: string, label: string): Promise<LoadResult> {
  if (spec.overallRate === undefined) throw new Error('a paced run needs overallRate');
  return runWorker('--paced', spec, workDir, label);
}
