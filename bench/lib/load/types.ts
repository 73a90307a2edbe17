/** What a load generator is asked to do, and what it reports: the same for wrk, autocannon and the paced generator. */

export interface LoadRequest {
  /** Path and query, as sent. */
  readonly path: string;
  /** Request headers beyond Host (e.g. Authorization, Accept-Encoding). */
  readonly headers: Readonly<Record<string, string>>;
}

export interface LoadSpec {
  readonly url: string;
  readonly connections: number;
  /** Whole seconds (wrk takes no fractions). */
  readonly durationSec: number;
  /** Paced (open loop) at this many requests per second, all connections together. */
  readonly overallRate?: number;
  /** The status counted as an answer (and timed); absent: any 2xx. */
  readonly expectStatus?: number;
  /** Sent in turn. */
  readonly requests: readonly LoadRequest[];
}

export type GeneratorName = 'wrk' | 'autocannon' | 'paced';

export interface LoadResult {
  readonly generator: GeneratorName;
  /** Answers with the expected status: what req/s counts. */
  readonly completed: number;
  /** Every answer, whatever its status. */
  readonly responses: number;
  /** Answers with another status than expected. */
  readonly unexpected: number;
  /** Connection errors and timeouts. */
  readonly errors: number;
  readonly durationSec: number;
  readonly rps: number;
  readonly p50Ms: number;
  readonly p90Ms: number;
  readonly p99Ms: number;
  readonly p999Ms: number;
  readonly maxMs: number;
  /** Bytes read per answer, head and body: the bytes on the wire. */
  readonly bytesPerResponse: number;
  /** By status code (wrk counts them only when a status is expected; otherwise only `unexpected`). */
  readonly statusCodes: Readonly<Record<string, number>>;
  /** The generator's own CPU over the run, % of one core (a generator near 100% caps what it measures). */
  readonly clientCpuPct: number;
  /** Paced only: how long after its due time the generator saw each request due (its own error). */
  readonly scheduleErrorP99Ms?: number;
  readonly scheduleErrorMaxMs?: number;
}

export function isExpected(spec: Pick<LoadSpec, 'expectStatus'>, status: number): boolean {
  return spec.expectStatus === undefined ? status >= 200 && status < 300 : status === spec.expectStatus;
}

/**
 * Reads a result from a worker's output line. JSON has no NaN (an empty run's percentiles are
 * written as null): those come back as NaN.
 */
export function parseLoadResult(line: string): LoadResult {
  const value: unknown = JSON.parse(line);
  if (typeof value !== 'object' || value === null) throw new Error(`load result: not an object: ${line.slice(0, 200)}`);
  const record = value as Record<string, unknown>;
  const count = (key: string): number => {
    const n = record[key];
    if (typeof n !== 'number') throw new Error(`load result: ${key} missing: ${line.slice(0, 200)}`);
    return n;
  };
  const figure = (key: string): number => {
    const n = record[key];
    return typeof n === 'number' ? n : Number.NaN;
  };
  const generator = record.generator;
  if (generator !== 'wrk' && generator !== 'autocannon' && generator !== 'paced')
    throw new Error(`load result: unknown generator: ${line.slice(0, 200)}`);
  const statusCodes: Record<string, number> = {};
  if (typeof record.statusCodes === 'object' && record.statusCodes !== null) {
    for (const [status, n] of Object.entries(record.statusCodes)) if (typeof n === 'number') statusCodes[status] = n;
  }
  return {
    generator,
    completed: count('completed'),
    responses: count('responses'),
    unexpected: count('unexpected'),
    errors: count('errors'),
    durationSec: count('durationSec'),
    rps: figure('rps'),
    p50Ms: figure('p50Ms'),
    p90Ms: figure('p90Ms'),
    p99Ms: figure('p99Ms'),
    p999Ms: figure('p999Ms'),
    maxMs: figure('maxMs'),
    bytesPerResponse: figure('bytesPerResponse'),
    statusCodes,
    clientCpuPct: figure('clientCpuPct'),
    ...(typeof record.scheduleErrorP99Ms === 'number' && { scheduleErrorP99Ms: record.scheduleErrorP99Ms }),
    ...(typeof record.scheduleErrorMaxMs === 'number' && { scheduleErrorMaxMs: record.scheduleErrorMaxMs }),
  };
}
