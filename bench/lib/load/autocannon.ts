/**
 * autocannon, the fallback closed-loop generator where wrk is not installed. It saturates its
 * own core before a bare `node:http` server does, which understates the baseline's ceiling:
 * the report shows its client CPU beside the figures. Latencies are kept per answer at 1 µs
 * (autocannon's own histogram has 1 ms steps), for answers with the expected status only.
 */
import autocannon from 'autocannon';
import { LatencyHistogram } from '../stats.js';
import { isExpected, type LoadResult, type LoadSpec } from './types.js';

export async function runAutocannon(spec: LoadSpec): Promise<LoadResult> {
  const histogram = new LatencyHistogram();
  const statusCodes: Record<string, number> = {};
  let responses = 0;
  let bytes = 0;
  const cpuBefore = process.cpuUsage();
  const startedAt = performance.now();
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url: spec.url,
        connections: spec.connections,
        duration: spec.durationSec,
        ...(spec.overallRate !== undefined && { overallRate: spec.overallRate }),
        requests: spec.requests.map((r) => ({ method: 'GET' as const, path: r.path, headers: { ...r.headers } })),
      },
      (error: unknown, done: autocannon.Result) =>
        error === null || error === undefined
          ? resolve(done)
          : reject(error instanceof Error ? error : new Error(String(error))),
    );
    instance.on('response', (_client, statusCode, resBytes, responseTime) => {
      responses += 1;
      bytes += resBytes;
      statusCodes[String(statusCode)] = (statusCodes[String(statusCode)] ?? 0) + 1;
      if (isExpected(spec, statusCode)) histogram.record(responseTime);
    });
  });
  const wallUs = (performance.now() - startedAt) * 1e3;
  const cpu = process.cpuUsage(cpuBefore);
  return {
    generator: 'autocannon',
    completed: histogram.count,
    responses,
    unexpected: responses - histogram.count,
    errors: result.errors + result.timeouts,
    durationSec: result.duration,
    rps: histogram.count / result.duration,
    p50Ms: histogram.percentileMs(50),
    p90Ms: histogram.percentileMs(90),
    p99Ms: histogram.percentileMs(99),
    p999Ms: histogram.percentileMs(99.9),
    maxMs: histogram.maxMs,
    bytesPerResponse: bytes / Math.max(1, responses),
    statusCodes,
    clientCpuPct: (100 * (cpu.user + cpu.system)) / wallUs,
  };
}
