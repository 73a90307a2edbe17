/**
 * `npm run loadtest`: the topology of `docker-compose.yml` as local processes, for machines
 * without Docker (docs/load-test.md). The same services, the same commands, the same config
 * file (`config/loadtest.yaml`) and the same load generator:
 *
 *   redis          redis-server (no persistence) on a free port; or, with LOADTEST_REDIS=cluster,
 *                  a real Redis Cluster of 6 nodes (3 masters, 3 replicas), given to the replicas
 *                  as REDIS_CLUSTER_NODES instead of REDIS_URL
 *   sandbox        node dist/sandbox/main.js           (SANDBOX_CONTROL=1: its counters)
 *   proxy1..N      node dist/main.js                   (REDIS_URL or REDIS_CLUSTER_NODES, UPSTREAM_URL, CONFIG_FILE)
 *   lb             node dist-bench/bench/balancer.js   (round robin; nginx in docker-compose)
 *   loadgen        bench/loadgen.ts, in this process: a line per second, then the totals
 *
 * Then, unless LOADTEST_FRESHNESS_SECONDS is 0, the freshness phase on the same topology
 * (bench/loadtest-freshness.ts): the sandbox live, readers through the balancer judged against its
 * change log, with the replicas' TTLs alone and then with each change sent to proxy1's
 * `/admin/cache/invalidate` (every replica runs with one ADMIN_TOKEN and one INVALIDATE_TOKEN, the
 * webhook's, drawn for the run).
 *
 * It then writes the run's JSON and a self-contained HTML report (charts over time, statuses, the
 * topology, the freshness figures) to LOADTEST_REPORT_DIR, and prints the Markdown lines for
 * docs/load-test.md.
 *
 * Settings: LOADTEST_REPLICAS (3, as docker-compose), LOADTEST_SECONDS (10), LOADTEST_CONNECTIONS
 * (32), LOADTEST_REDIS (single | cluster), LOADTEST_REPORT_DIR (loadtest-report), LOADTEST_WALKERS (0)
 * and LOADTEST_WALKER_THINK_MS (100): keyset walkers beside the readers, LOADTEST_CONFIG (the
 * replicas' config file, config/loadtest.yaml: another one to measure a setting),
 * LOADTEST_FRESHNESS_SECONDS (20 a variant; 0: no freshness phase) and LOADTEST_FRESHNESS_RATE (200
 * req/s). Everything it started is stopped at the end, also on failure or Ctrl-C.
 */
import { randomBytes } from 'node:crypto';
import { cpus } from 'node:os';
import { fileURLToPath } from 'node:url';
import { envChoice, envInt, envText } from './lib/env.js';
import { docsBlock, LOAD_TEST_DOC, runStamp, say } from './lib/format.js';
import { launch, runProgram } from './lib/processes.js';
import {
  type RedisTopology,
  requireBuild,
  startProxy,
  startRedisClusterTopology,
  startRedisServer,
  startSandbox,
} from './lib/services.js';
import { formatReport, runLoad } from './loadgen.js';
import { freshnessPace, runLoadtestFreshness } from './loadtest-freshness.js';
import { type LoadtestReport, loadtestMarkdown, writeLoadtestReport } from './loadtest-report.js';

/** The key the replicas verify with and the load generator signs with (as in docker-compose.yml). */
export const LOADTEST_SECRET = 'loadtest-secret-of-at-least-thirty-two-bytes';
export const LOADTEST_CONFIG_FILE = 'config/loadtest.yaml';
/** As many replicas as docker-compose.yml runs (proxy1..3). */
export const LOADTEST_REPLICAS = 3;
export const LOADTEST_REPORT_DIR = 'loadtest-report';
const GENERATOR = 'autocannon (Zipf-popular pages, 16 credentials)';

async function main(): Promise<number> {
  const replicas = envInt('LOADTEST_REPLICAS', LOADTEST_REPLICAS, 1, 32);
  const seconds = envInt('LOADTEST_SECONDS', 10, 1, 86_400);
  const connections = envInt('LOADTEST_CONNECTIONS', 32, 1, 10_000);
  const redisMode = envChoice('LOADTEST_REDIS', ['single', 'cluster']);
  const reportDir = envText('LOADTEST_REPORT_DIR') ?? LOADTEST_REPORT_DIR;
  const configFile = envText('LOADTEST_CONFIG') ?? LOADTEST_CONFIG_FILE;
  const freshnessSettings = freshnessPace();
  requireBuild();
  // One operator token for every replica (the freshness phase's purges and TTL overrides), and one
  // token of the change feed, which may only invalidate (the webhook's).
  const adminToken = randomBytes(24).toString('base64url');
  const feedToken = randomBytes(24).toString('base64url');

  const redis: RedisTopology = redisMode === 'cluster' ? await startRedisClusterTopology() : await startRedisServer();
  const sandbox = await startSandbox({ secret: LOADTEST_SECRET });
  const proxies = await Promise.all(
    Array.from({ length: replicas }, (_, i) =>
      startProxy({
        name: `proxy${String(i + 1)}`,
        upstreamUrl: sandbox.url,
        redis,
        secret: LOADTEST_SECRET,
        configFile,
        logLevel: 'warn',
        stdout: 'pipe',
        // No measurement on a degraded start: every replica must have its Redis first.
        waitForRedis: true,
        env: { ADMIN_TOKEN: adminToken, INVALIDATE_TOKEN: feedToken },
      }),
    ),
  );
  const balancer = launch('lb', process.execPath, ['dist-bench/bench/balancer.js'], {
    env: {
      PATH: process.env.PATH ?? '',
      LB_PORT: '0',
      LB_HOST: '127.0.0.1',
      LB_BACKENDS: proxies.map((p) => p.url.replace('http://', '')).join(','),
    },
    stdout: 'pipe',
  });
  const [, lbPort = ''] = await balancer.waitForLine(/balancer listening on (\d+)/, 10_000);
  const balancerUrl = `http://127.0.0.1:${lbPort}`;

  say(
    `topology: redis ${redis.description} (${redis.mode === 'cluster' ? `REDIS_CLUSTER_NODES=${redis.nodes.join(',')}` : `REDIS_URL=${redis.url ?? ''}`}), sandbox ${sandbox.url}, ${String(replicas)} replicas (${proxies.map((p) => p.url).join(', ')}), balancer ${balancerUrl}`,
  );
  const result = await runLoad({
    targetUrl: balancerUrl,
    adminUrls: proxies.map((p) => p.adminUrl),
    sandboxUrl: sandbox.url,
    secret: LOADTEST_SECRET,
    seconds,
    connections,
    walkers: envInt('LOADTEST_WALKERS', 0, 0, 1_000),
    walkerThinkMs: envInt('LOADTEST_WALKER_THINK_MS', 100, 0, 60_000),
  });
  say(formatReport(result, seconds));
  say();
  const freshness =
    freshnessSettings === undefined
      ? undefined
      : await runLoadtestFreshness(
          {
            balancerUrl,
            adminUrls: proxies.map((p) => p.adminUrl),
            sandboxUrl: sandbox.url,
            secret: LOADTEST_SECRET,
            adminToken,
            feedToken,
          },
          freshnessSettings,
          `${String(replicas)} ${replicas === 1 ? 'replica' : 'replicas'} sharing ${redis.mode === 'cluster' ? 'a Redis Cluster' : 'one Redis'}`,
        );

  const date = new Date();
  const stampDetails = [
    `${String(replicas)} ${replicas === 1 ? 'replica' : 'replicas'}`,
    redis.mode === 'cluster' ? 'Redis Cluster' : 'one Redis',
    `${String(seconds)} s`,
    `${String(connections)} connections`,
  ];
  const report: LoadtestReport = {
    stamp: runStamp('npm run loadtest', stampDetails, date),
    date: date.toISOString(),
    machine: { cores: cpus().length, cpu: cpus()[0]?.model.trim() ?? 'unknown CPU', node: process.version },
    settings: { seconds, connections, replicas, redis: redis.mode },
    topology: {
      redis: { mode: redis.mode, description: redis.description, nodes: redis.nodes },
      sandbox: sandbox.url,
      replicas: proxies.map((p) => p.url),
      balancer: balancerUrl,
      generator: GENERATOR,
    },
    result,
    ...(freshness !== undefined && { freshness }),
  };
  const files = writeLoadtestReport(reportDir, report);
  say(`report: ${files.html}`);
  say(`        ${files.json}`);
  say();
  for (const line of docsBlock(LOAD_TEST_DOC, loadtestMarkdown(report))) say(line);
  say(`LOADTEST_RESULT ${JSON.stringify({ ...result, redis: redis.mode, report: files.html })}`);
  return 0;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) runProgram('loadtest', main);
