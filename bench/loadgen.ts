/**
 * The load generator of the load test: the `loadgen` service of `docker-compose.yml` (profile
 * `load`) and the last step of `npm run loadtest`. Readers of every sandbox company, four
 * credentials each, ask for the thirteen resources with a few page sizes and cursors (popular
 * pages more often than others, as real readers do), through the load balancer, for a while
 * (bench/loadgen/readers.ts).
 *
 * Every second it prints a line — req/s, p50, p99, errors, the hit ratio and the upstream calls
 * of that second (the last two from the replicas' `/metrics`) — and keeps it for the report's
 * charts (bench/loadgen/seconds.ts). At the end (bench/loadgen/load.ts, bench/loadgen/report.ts):
 * throughput, latency percentiles and statuses (every answer timed, at 1 µs), and the hit ratio,
 * coalesced waits, upstream calls and Redis errors summed over the replicas' `/metrics` (the
 * difference over the run, bench/loadgen/counters.ts), and the requests the sandbox served.
 *
 * As a process: `node dist-bench/bench/loadgen.js`, with TARGET_URL (the balancer), ADMIN_URLS
 * (`http://replica:9090,…`, for `/metrics`), SANDBOX_URL (its `/__sandbox/stats`, when it runs
 * with SANDBOX_CONTROL=1), JWT_SECRET (the key the replicas verify with), LOADTEST_SECONDS (10),
 * LOADTEST_CONNECTIONS (32), LOADTEST_WALKERS (0: keyset walkers beside the readers, walking
 * movements to the end, bench/lib/load/walkers.ts) and LOADTEST_WALKER_THINK_MS (100). The last
 * line is `LOADTEST_RESULT {json}` for machines.
 */
import { fileURLToPath } from 'node:url';
import { envInt, envText } from './lib/env.js';
import { runLoad } from './loadgen/load.js';
import { printReport } from './loadgen/report.js';

// What `npm run loadtest` (bench/loadtest.ts) and the load test's tests read.
export { runLoad } from './loadgen/load.js';
export { formatReport } from './loadgen/report.js';
export type { LoadOptions, LoadtestResult, SecondSample } from './loadgen/types.js';

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const required = (name: string): string => {
    const value = envText(name);
    if (value === undefined) throw new TypeError(`${name} is required`);
    return value;
  };
  const seconds = envInt('LOADTEST_SECONDS', 10, 1, 86_400);
  runLoad({
    targetUrl: required('TARGET_URL'),
    adminUrls: required('ADMIN_URLS')
      .split(',')
      .map((u) => u.trim())
      .filter((u) => u !== ''),
    sandboxUrl: envText('SANDBOX_URL'),
    secret: required('JWT_SECRET'),
    seconds,
    connections: envInt('LOADTEST_CONNECTIONS', 32, 1, 10_000),
    walkers: envInt('LOADTEST_WALKERS', 0, 0, 1_000),
    walkerThinkMs: envInt('LOADTEST_WALKER_THINK_MS', 100, 0, 60_000),
  }).then(
    (result) => {
      printReport(result, seconds);
    },
    (error: unknown) => {
      process.stderr.write(`loadgen: ${error instanceof Error ? error.message : String(error)}\n`);
      process.exit(1);
    },
  );
}
