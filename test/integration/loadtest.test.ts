/**
 * `npm run loadtest` (its compiled script; the suite's setup builds it): the docker-compose
 * topology as local processes — redis-server, the sandbox, proxy replicas, the balancer — under
 * a short load. It must finish with exit code 0, every request answered, and figures that agree
 * with each other: the replicas' upstream calls are exactly what the sandbox served.
 */
import { describe, expect, it } from 'vitest';
import type { LoadResult } from '../../bench/loadgen.js';
import { runNode } from '../helpers/process.js';

describe('npm run loadtest', () => {
  it('runs the topology and reports throughput, latency, hit ratio and upstream calls that add up', async () => {
    const run = runNode('dist-bench/bench/loadtest.js', { LOADTEST_SECONDS: '2', LOADTEST_REPLICAS: '2', LOADTEST_CONNECTIONS: '8' });
    const exitCode = await run.exited;
    expect(exitCode, run.stderr()).toBe(0);
    const line = run.stdout().split('\n').find((l) => l.startsWith('LOADTEST_RESULT '));
    expect(line).toBeDefined();
    const result = JSON.parse(line?.slice('LOADTEST_RESULT '.length) ?? '{}') as LoadResult;
    expect(result.requests).toBeGreaterThan(0);
    expect(result.errors).toBe(0);
    expect(result.statuses['2xx']).toBeGreaterThan(0);
    expect(result.statuses['4xx']).toBe(0);
    expect(result.hitRatio).toBeGreaterThan(0);
    expect(result.upstreamRequests).toBeGreaterThan(0);
    expect(result.sandboxServed).toBe(result.upstreamRequests);
    expect(result.redisErrors).toBe(0);
    expect(run.stdout()).toMatch(/topology: redis redis:\/\/127\.0\.0\.1:\d+, sandbox http:\/\/127\.0\.0\.1:\d+, 2 replicas/);
    expect(run.stdout()).toMatch(/latency p50 \/ p90 \/ p99 \/ max/);
  });
});
