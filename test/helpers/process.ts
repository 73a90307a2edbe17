/** Runs the compiled entry points as child processes, the way users run them. */
import { type ChildProcess, spawn } from 'node:child_process';

export interface RunningProcess {
  readonly child: ChildProcess;
  stdout(): string;
  stderr(): string;
  /** Resolves with the first stdout match; rejects if the process exits first. */
  waitFor(pattern: RegExp): Promise<RegExpMatchArray>;
  readonly exited: Promise<number | null>;
  stop(signal?: NodeJS.Signals): Promise<number | null>;
}

export function runNode(
  script: string,
  env: Record<string, string> = {},
  args: readonly string[] = [],
  options: { readonly cwd?: string } = {},
): RunningProcess {
  const child = spawn(process.execPath, [script, ...args], {
    env: { PATH: process.env.PATH ?? '', LOG_LEVEL: 'silent', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    ...(options.cwd !== undefined && { cwd: options.cwd }),
  });
  let out = '';
  let err = '';
  const waiters: Array<() => void> = [];
  child.stdout?.on('data', (chunk: Buffer) => {
    out += chunk.toString('utf8');
    for (const wake of waiters.splice(0)) wake();
  });
  child.stderr?.on('data', (chunk: Buffer) => {
    err += chunk.toString('utf8');
  });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return {
    child,
    stdout: () => out,
    stderr: () => err,
    exited,
    waitFor(pattern) {
      return new Promise((resolve, reject) => {
        let done = false;
        const check = (): void => {
          if (done) return;
          const match = out.match(pattern);
          if (match !== null) {
            done = true;
            resolve(match);
          } else {
            waiters.push(check);
          }
        };
        void exited.then((code) => {
          if (!done) {
            done = true;
            reject(new Error(`exited with ${String(code)} before ${String(pattern)}; stderr: ${err}`));
          }
        });
        check();
      });
    },
    async stop(signal = 'SIGTERM') {
      if (child.exitCode === null && child.signalCode === null) child.kill(signal);
      return exited;
    },
  };
}
