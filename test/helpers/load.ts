/**
 * A closed-loop load for the multi-replica suites: `connections` clients, each sending its next
 * request as soon as the last is answered, for a while. Every answer is counted by status; nothing
 * is timed for an assertion (speed is the benchmark's business), only counted.
 */
import { Agent, request } from 'undici';

export interface LoadTarget {
  readonly base: string;
  readonly path: string;
  readonly token: string;
}

export interface LoadResult {
  readonly answers: number;
  readonly byStatus: Readonly<Record<string, number>>;
  /** Connection errors (no HTTP answer at all). */
  readonly errors: number;
}

export async function closedLoop(options: {
  readonly connections: number;
  readonly durationMs: number;
  /** The `i`-th request of the run (0-based, over all clients). */
  readonly next: (i: number) => LoadTarget;
  /** Checked before each request: `true` ends the run before its duration. */
  readonly stopWhen?: () => boolean;
  /** Told of every answer: the request's index, its status and headers, and when it ended (ms). */
  readonly onAnswer?: (
    i: number,
    status: number,
    headers: Readonly<Record<string, string | string[] | undefined>>,
    at: number,
  ) => void;
}): Promise<LoadResult> {
  const dispatcher = new Agent({ connections: options.connections, keepAliveTimeout: 10_000 });
  const byStatus: Record<string, number> = {};
  let answers = 0;
  let errors = 0;
  let issued = 0;
  const deadline = Date.now() + options.durationMs;
  async function client(): Promise<void> {
    while (Date.now() < deadline && options.stopWhen?.() !== true) {
      const index = issued++;
      const target = options.next(index);
      try {
        const res = await request(`${target.base}${target.path}`, {
          dispatcher,
          headers: { authorization: `Bearer ${target.token}` },
        });
        await res.body.dump();
        options.onAnswer?.(index, res.statusCode, res.headers, Date.now());
        byStatus[String(res.statusCode)] = (byStatus[String(res.statusCode)] ?? 0) + 1;
        answers += 1;
      } catch {
        errors += 1;
      }
    }
  }
  await Promise.all(Array.from({ length: options.connections }, () => client()));
  await dispatcher.close();
  return { answers, byStatus, errors };
}
