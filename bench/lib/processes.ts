/**
 * The processes a bench or load test run starts: launched (optionally pinned to one CPU with
 * `taskset`), watched for a ready line, stopped, and all of them killed however the run ends
 * (normal end, failure, Ctrl-C, SIGTERM), with their scratch directories removed.
 */
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as delay } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

/** The repository root (this file runs from bench/lib/ in tests, from dist-bench/bench/lib/ built). */
export const ROOT = ((): string => {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('bench: no package.json above this file');
    dir = parent;
  }
  return dir;
})();

/** The server under measurement runs here; everything else (load generator, Redis, sandbox) on CLIENT_CPU. */
export const SERVER_CPU = 0;
export const CLIENT_CPU = 1;

/** The absolute path of a command on PATH (and in /usr/sbin, where Debian puts nginx), or undefined. */
export function commandPath(name: string): string | undefined {
  if (!/^[A-Za-z0-9_.-]+$/.test(name)) throw new TypeError(`not a command name: ${name}`);
  try {
    const found = execFileSync(
      'sh',
      ['-c', `command -v ${name} || { [ -x /usr/sbin/${name} ] && echo /usr/sbin/${name}; }`],
      { encoding: 'utf8' },
    ).trim();
    return found === '' ? undefined : found;
  } catch {
    return undefined;
  }
}

const TASKSET = commandPath('taskset');

/** Whether servers and load generators get a CPU each (taskset present, two CPUs or more). */
export function canPin(): boolean {
  return TASKSET !== undefined && cpus().length >= 2;
}

/** Pins every thread of a running process to one CPU (no-op when pinning is unavailable). */
export function pin(pid: number, cpu: number): void {
  if (TASKSET === undefined || !canPin()) return;
  execFileSync(TASKSET, ['-a', '-p', '-c', String(cpu), String(pid)], { stdio: 'ignore' });
}

export interface Launched {
  readonly name: string;
  readonly child: ChildProcess;
  readonly pid: number;
  /** Resolves when the process has exited (also when it could not start). */
  readonly exited: Promise<void>;
  hasExited(): boolean;
  /** The first 64 KiB of its stdout (when piped) and stderr. */
  output(): string;
  errors(): string;
  /** Resolves with the first match in stdout; rejects if it exits first or after `timeoutMs`. */
  waitForLine(pattern: RegExp, timeoutMs: number): Promise<RegExpMatchArray>;
}

export interface LaunchOptions {
  readonly env: NodeJS.ProcessEnv;
  /** Pin to this CPU (when pinning is available). */
  readonly cpu?: number;
  /** `ignore`: discarded at the OS level (a proxy's request log costs what it costs on /dev/null). */
  readonly stdout: 'pipe' | 'ignore';
}

const running = new Set<ChildProcess>();
const scratch = new Set<string>();
const cleanups: Array<() => Promise<void>> = [];
const KEEP_BYTES = 65_536;

export function launch(name: string, command: string, args: readonly string[], options: LaunchOptions): Launched {
  const pinned = options.cpu !== undefined && TASKSET !== undefined && canPin();
  const stdio: ['ignore', 'pipe' | 'ignore', 'pipe'] = ['ignore', options.stdout, 'pipe'];
  const child =
    pinned && TASKSET !== undefined
      ? spawn(TASKSET, ['-c', String(options.cpu), command, ...args], { cwd: ROOT, env: options.env, stdio })
      : spawn(command, [...args], { cwd: ROOT, env: options.env, stdio });
  running.add(child);
  let out = '';
  let err = '';
  let exitedFlag = false;
  const wakers: Array<() => void> = [];
  const wake = (): void => {
    for (const waker of wakers.splice(0)) waker();
  };
  child.stdout?.on('data', (chunk: Buffer) => {
    if (out.length < KEEP_BYTES) out += chunk.toString('utf8');
    wake();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    if (err.length < KEEP_BYTES) err += chunk.toString('utf8');
  });
  const exited = new Promise<void>((resolve) => {
    const done = (): void => {
      exitedFlag = true;
      running.delete(child);
      wake();
      resolve();
    };
    child.once('exit', done);
    child.once('error', (error) => {
      err += `${error.message}\n`;
      done();
    });
  });
  const pid = child.pid;
  if (pid === undefined) throw new Error(`cannot start ${name} (${command})`);
  return {
    name,
    child,
    pid,
    exited,
    hasExited: () => exitedFlag,
    output: () => out,
    errors: () => err,
    waitForLine(pattern, timeoutMs) {
      return new Promise((resolve, reject) => {
        const timer = setTimeout(
          () => reject(new Error(`${name}: not ready after ${String(timeoutMs)} ms; stderr: ${err.slice(-800)}`)),
          timeoutMs,
        );
        const check = (): void => {
          const match = out.match(pattern);
          if (match !== null) {
            clearTimeout(timer);
            resolve(match);
          } else if (exitedFlag) {
            clearTimeout(timer);
            reject(new Error(`${name} exited before it was ready; stderr: ${err.slice(-800)}`));
          } else {
            wakers.push(check);
          }
        };
        check();
      });
    },
  };
}

/** SIGTERM, then SIGKILL after `graceMs`; resolves once it has exited. */
export async function stop(launched: Launched, graceMs = 3_000): Promise<void> {
  if (launched.hasExited()) return;
  launched.child.kill('SIGTERM');
  const gone = await Promise.race([launched.exited.then(() => true), delay(graceMs).then(() => false)]);
  if (!gone) {
    launched.child.kill('SIGKILL');
    await launched.exited;
  }
}

/** A temporary directory removed when the run ends, however it ends. */
export function scratchDir(prefix: string): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  scratch.add(dir);
  return dir;
}

/** Work to do when the run ends (stopping what `launch` did not start, e.g. a Redis Cluster). */
export function onCleanup(cleanup: () => Promise<void>): void {
  cleanups.push(cleanup);
}

/** SIGKILL whatever still runs and remove the scratch directories: synchronous, for `exit`. */
function killEverything(): void {
  for (const child of running) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  running.clear();
  for (const dir of scratch) rmSync(dir, { recursive: true, force: true });
  scratch.clear();
}

/** Stops everything gracefully (the cleanups, then every process still running), then kills what is left. */
export async function stopEverything(): Promise<void> {
  const pending = cleanups.splice(0).reverse();
  await Promise.race([Promise.allSettled(pending.map((cleanup) => cleanup())), delay(10_000)]);
  await Promise.all(
    [...running].map(async (child) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      child.kill('SIGTERM');
      await Promise.race([exited, delay(3_000)]);
    }),
  );
  killEverything();
}

/**
 * Runs `main` as a program: exit code from its result, everything stopped at the end, and on
 * SIGINT/SIGTERM (a person's Ctrl-C) too.
 */
export function runProgram(name: string, main: () => Promise<number>): void {
  process.on('exit', killEverything);
  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.once(signal, () => {
      void stopEverything().finally(() => process.exit(130));
    });
  }
  void main()
    .catch((error: unknown) => {
      process.stderr.write(
        `${name} failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
      );
      return 1;
    })
    .then(async (code) => {
      await stopEverything();
      process.exit(code);
    });
}
