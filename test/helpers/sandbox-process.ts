/**
 * The sandbox system of record as its own process (`node dist/sandbox/main.js`), driven through its
 * test-only control API (`/__sandbox/`): for the suites that judge when requests reach the upstream.
 * In the test process, its clock would share an event loop with the load generator, and a request
 * stamped late there would look like a burst the proxy never sent.
 */

import type { SandboxStats } from '../../src/sandbox/server.js';
import { freePort } from '../support/free-port.js';
import { send } from './http.js';
import { type RunningProcess, runNode } from './process.js';

export interface SandboxFaults {
  readonly latencyMs?: number;
  readonly status?: number;
  readonly times?: number;
}

export interface SandboxProcess {
  readonly url: string;
  readonly process: RunningProcess;
  stats(): Promise<SandboxStats>;
  /** Counters back to zero (and its faults cleared). */
  reset(): Promise<void>;
  setFaults(faults: SandboxFaults): Promise<void>;
  close(): Promise<void>;
}

export async function startSandboxProcess(secret: string): Promise<SandboxProcess> {
  const port = await freePort();
  const child = runNode('dist/sandbox/main.js', {
    SANDBOX_PORT: String(port),
    SANDBOX_CONTROL: '1',
    SANDBOX_RATE_LIMIT: '0',
    JWT_SECRET: secret,
  });
  await child.waitFor(/listening on (http:\/\/\S+)/);
  const url = `http://127.0.0.1:${String(port)}`;
  async function control(method: string, action: string, body?: unknown): Promise<string> {
    const res = await send(url, `/__sandbox/${action}`, {
      method,
      ...(body !== undefined && {
        headers: [['Content-Type', 'application/json']],
        body: JSON.stringify(body),
      }),
    });
    if (res.status !== 200) throw new Error(`sandbox ${action}: ${String(res.status)} ${res.text}`);
    return res.text;
  }
  return {
    url,
    process: child,
    stats: async () => JSON.parse(await control('GET', 'stats')) as SandboxStats,
    reset: async () => void (await control('POST', 'reset')),
    setFaults: async (faults) => void (await control('PUT', 'faults', faults)),
    close: async () => void (await child.stop('SIGTERM')),
  };
}

/** What the upstream saw between two instants (ms since the epoch): the most at once, the most in any second. */
export interface UpstreamPhase {
  readonly arrivals: number;
  readonly maxInFlight: number;
  readonly maxPerSlidingSecond: number;
}

export function phaseOf(stats: SandboxStats, from: number, to: number): UpstreamPhase {
  const inPhase = stats.arrivals.filter((a) => a.at >= from && a.at < to);
  const times = inPhase.map((a) => a.at);
  let maxPerSlidingSecond = 0;
  let first = 0;
  for (let last = 0; last < times.length; last++) {
    // Arrivals within the 1 000 ms that end at this one (the sandbox's own sliding window).
    while ((times[first] ?? 0) <= (times[last] ?? 0) - 1_000) first += 1;
    maxPerSlidingSecond = Math.max(maxPerSlidingSecond, last - first + 1);
  }
  return {
    arrivals: inPhase.length,
    maxInFlight: inPhase.reduce((max, a) => Math.max(max, a.inFlight), 0),
    maxPerSlidingSecond,
  };
}
