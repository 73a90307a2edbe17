/**
 * Server CPU time from Linux's /proc: user + system time of a process, all its threads, so CPU
 * per request = (after − before) / answers. For nginx, its worker processes are the ones that
 * serve (the master only supervises).
 */
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const CLK_TCK = ((): number => {
  try {
    const ticks = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
    return Number.isInteger(ticks) && ticks > 0 ? ticks : 100;
  } catch {
    return 100;
  }
})();

/** user + system CPU time of one process, µs; undefined when it is gone or /proc is not there. */
export function processCpuUs(pid: number): number | undefined {
  try {
    const stat = readFileSync(`/proc/${String(pid)}/stat`, 'utf8');
    // Fields after the command name, which is in parentheses and may hold spaces.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return Number.isFinite(utime) && Number.isFinite(stime) ? ((utime + stime) * 1e6) / CLK_TCK : undefined;
  } catch {
    return undefined;
  }
}

/** The summed CPU time of several processes, µs; undefined when any of them cannot be read. */
export function cpuUsOf(pids: readonly number[]): number | undefined {
  let total = 0;
  for (const pid of pids) {
    const us = processCpuUs(pid);
    if (us === undefined) return undefined;
    total += us;
  }
  return pids.length === 0 ? undefined : total;
}

/** The direct children of a process. */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${String(pid)}/task/${String(pid)}/children`, 'utf8')
      .trim()
      .split(/\s+/)
      .filter((item) => /^[0-9]+$/.test(item))
      .map(Number);
  } catch {
    try {
      return execFileSync('ps', ['--ppid', String(pid), '-o', 'pid='], { encoding: 'utf8' })
        .split('\n')
        .map((line) => line.trim())
        .filter((item) => /^[0-9]+$/.test(item))
        .map(Number);
    } catch {
      return [];
    }
  }
}

/** A process's command line as shown by ps (nginx renames its processes, e.g. "nginx: worker process"). */
export function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${String(pid)}/cmdline`, 'utf8')
      .replaceAll('\0', ' ')
      .trim();
  } catch {
    return '';
  }
}
