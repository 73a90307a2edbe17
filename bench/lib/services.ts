/**
 * The parts of the topology, as local processes: Redis (one `redis-server`, or a real 6-node
 * Redis Cluster), the sandbox system of record, proxy replicas (`node dist/main.js`, as
 * shipped), and the bare `node:http` baseline. The bench and the load test start theirs here.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort, freePorts } from '../../test/support/free-port.js';
import { startRedisCluster } from '../../test/support/redis-cluster.js';
import { SERVED_PATH } from '../baseline-server.js';
import { get, waitReady } from './http.js';
import { commandPath, type Launched, launch, onCleanup, ROOT } from './processes.js';

const PATH = process.env.PATH ?? '';

/** The compiled proxy and sandbox must exist (`npm run bench` and `npm run loadtest` build them). */
export function requireBuild(): void {
  for (const file of ['dist/main.js', 'dist/sandbox/main.js']) {
    if (!existsSync(join(ROOT, file)))
      throw new Error(`${file} is missing: run \`npm run build\` first (npm run bench and npm run loadtest do)`);
  }
}

export type RedisMode = 'single' | 'cluster';

/** What the replicas are given, and what a report says about it. */
export interface RedisTopology {
  readonly mode: RedisMode;
  /** `REDIS_URL` or `REDIS_CLUSTER_NODES`, as the replicas get it. */
  readonly env: { readonly REDIS_URL: string } | { readonly REDIS_CLUSTER_NODES: string };
  /** For a plain client of the bench (single mode only: the cluster has no one URL). */
  readonly url: string | undefined;
  /** `host:port` of every node. */
  readonly nodes: readonly string[];
  /** e.g. "redis-server 7.0.15, one node" or "Redis Cluster of 6 redis-server 7.0.15 nodes (3 masters, 3 replicas)". */
  readonly description: string;
}

/** e.g. "7.0.15"; fails with what to install when redis-server is missing. */
async function redisServerVersion(): Promise<string> {
  const server = commandPath('redis-server');
  if (server === undefined) throw new Error('redis-server is not installed (Debian: apt-get install redis-server)');
  const launched = launch('redis-server --version', server, ['--version'], { env: { PATH }, stdout: 'pipe' });
  await launched.exited;
  return /v=(\S+)/.exec(launched.output())?.[1] ?? 'unknown';
}

/** One `redis-server` on a free port, no persistence. */
export async function startRedisServer(
  cpu?: number,
): Promise<RedisTopology & { readonly launched: Launched; readonly url: string }> {
  const version = await redisServerVersion();
  for (let attempt = 0; ; attempt++) {
    const port = await freePort();
    const launched = launch(
      'redis-server',
      'redis-server',
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--protected-mode', 'no'],
      {
        env: { PATH },
        ...(cpu !== undefined && { cpu }),
        stdout: 'pipe',
      },
    );
    try {
      await launched.waitForLine(/Ready to accept connections/, 10_000);
    } catch (error) {
      if (attempt >= 4) throw error; // the port was taken between probe and launch: try another
      continue;
    }
    const url = `redis://127.0.0.1:${String(port)}`;
    return {
      launched,
      mode: 'single',
      env: { REDIS_URL: url },
      url,
      nodes: [`127.0.0.1:${String(port)}`],
      description: `redis-server ${version}, one node`,
    };
  }
}

/** A real Redis Cluster (3 masters, 3 replicas) on free ports, stopped when the run ends. */
export async function startRedisClusterTopology(): Promise<RedisTopology> {
  const version = await redisServerVersion();
  if (commandPath('redis-cli') === undefined)
    throw new Error('redis-cli is not installed (Debian: apt-get install redis-tools)');
  const cluster = await startRedisCluster();
  onCleanup(() => cluster.stop());
  const masters = (await cluster.masters()).length;
  return {
    mode: 'cluster',
    env: { REDIS_CLUSTER_NODES: cluster.seeds },
    url: undefined,
    nodes: cluster.nodes.map((node) => node.address),
    description: `Redis Cluster of ${String(cluster.nodes.length)} redis-server ${version} nodes (${String(masters)} masters, ${String(cluster.nodes.length - masters)} replicas)`,
  };
}

export interface SandboxOptions {
  readonly secret: string;
  readonly cpu?: number;
  /** Its own 429 above this many requests per second; 0: never (the sandbox's default is 1000). */
  readonly rateLimit?: number;
}

/** The sandbox system of record, with its control API (counters, faults) on. */
export async function startSandbox(options: SandboxOptions): Promise<{ launched: Launched; url: string }> {
  const launched = launch('sandbox', process.execPath, ['dist/sandbox/main.js'], {
    env: {
      PATH,
      SANDBOX_PORT: '0',
      SANDBOX_HOST: '127.0.0.1',
      SANDBOX_CONTROL: '1',
      JWT_SECRET: options.secret,
      ...(options.rateLimit !== undefined && { SANDBOX_RATE_LIMIT: String(options.rateLimit) }),
    },
    ...(options.cpu !== undefined && { cpu: options.cpu }),
    stdout: 'pipe',
  });
  const [, url = ''] = await launched.waitForLine(/listening on (http:\/\/\S+)/, 10_000);
  return { launched, url };
}

export interface ProxyOptions {
  readonly name: string;
  readonly upstreamUrl: string;
  /** None: the in-process store (and inbound limits counted in the process). */
  readonly redis?: RedisTopology;
  readonly secret: string;
  readonly configFile: string;
  /** `info`: one request log line per request, as shipped (to /dev/null unless `stdout: 'pipe'`). */
  readonly logLevel: string;
  readonly cpu?: number;
  /** Extra node flags (BENCH_NODE_FLAGS, a CPU profile). */
  readonly nodeFlags?: readonly string[];
  readonly stdout?: 'pipe' | 'ignore';
  /** Wait until the replica reports Redis ok, not only ready (the load test: no run on a degraded start). */
  readonly waitForRedis?: boolean;
  /** Another build's entry point (BENCH_BEFORE: an earlier commit's checkout); default this one's dist/main.js. */
  readonly mainJs?: string;
  /** Another node binary (BENCH_BEFORE_NODE); default the one running the bench. */
  readonly node?: string;
  /** More environment (the profiler's, bench/profile/preload.ts). */
  readonly env?: Readonly<Record<string, string>>;
}

export interface ProxyProcess {
  readonly launched: Launched;
  readonly url: string;
  readonly adminUrl: string;
}

/**
 * The V8 flags the proxy ships with, read from where they are set: `npm start` in package.json,
 * `node <flags…> dist/main.js` (docs/operations.md#the-runtime-flag). The replicas run with them,
 * so that the bench measures the proxy as it runs.
 */
export function shippedNodeFlags(): string[] {
  const scripts = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts?: Record<string, string> })
    .scripts;
  const words = (scripts?.start ?? '').split(' ');
  if (words.length < 2 || words[0] !== 'node' || words.at(-1) !== 'dist/main.js')
    throw new Error(`package.json: npm start is not \`node <flags…> dist/main.js\`: ${scripts?.start ?? '(none)'}`);
  return words.slice(1, -1);
}

/** A proxy replica (`node dist/main.js`) on free ports, ready when this resolves. */
export async function startProxy(options: ProxyOptions): Promise<ProxyProcess> {
  const [port = 0, adminPort = 0] = await freePorts(2);
  const flags = [...shippedNodeFlags(), ...(options.nodeFlags ?? [])];
  const launched = launch(
    options.name,
    options.node ?? process.execPath,
    [...flags, options.mainJs ?? 'dist/main.js'],
    {
      env: {
        PATH,
        NODE_ENV: 'production',
        HOST: '127.0.0.1',
        PORT: String(port),
        ADMIN_PORT: String(adminPort),
        UPSTREAM_URL: options.upstreamUrl,
        ...options.redis?.env,
        JWT_SECRET: options.secret,
        LOG_LEVEL: options.logLevel,
        CONFIG_FILE: options.configFile,
        ...options.env,
      },
      ...(options.cpu !== undefined && { cpu: options.cpu }),
      stdout: options.stdout ?? 'ignore',
    },
  );
  const adminUrl = `http://127.0.0.1:${String(adminPort)}`;
  await waitReady(launched, adminUrl, { timeoutMs: 20_000, redis: options.waitForRedis ?? false });
  return { launched, url: `http://127.0.0.1:${String(port)}`, adminUrl };
}

/**
 * The bare `node:http` server that answers `pages` (path → bytes) with two headers; `nodeFlags`
 * (the proxy's shipped ones, `--trace-gc-nvp`) when it is measured the same way as the proxy.
 */
export async function startBaseline(
  name: string,
  pagesFile: string,
  cpu?: number,
  nodeFlags: readonly string[] = [],
  env: Readonly<Record<string, string>> = {},
): Promise<{ launched: Launched; url: string }> {
  const script = join(ROOT, 'dist-bench', 'bench', 'baseline-server.js');
  const launched = launch(name, process.execPath, [...nodeFlags, script], {
    env: { PATH, BASELINE_PAGES: pagesFile, BASELINE_PORT: '0', ...env },
    ...(cpu !== undefined && { cpu }),
    stdout: 'pipe',
  });
  const [, port = ''] = await launched.waitForLine(/baseline listening on (\d+)/, 10_000);
  const url = `http://127.0.0.1:${port}`;
  return { launched, url };
}

/** How many pages a baseline server has served (nginx's origin: its cache misses). */
export async function baselineServed(url: string): Promise<number> {
  const value: unknown = JSON.parse((await get(`${url}${SERVED_PATH}`)).body.toString('utf8'));
  if (typeof value !== 'object' || value === null || !('served' in value) || typeof value.served !== 'number')
    throw new Error('baseline: unexpected served count');
  return value.served;
}

/** Checks that a server answers `path` with exactly `body`. */
export async function expectBytes(name: string, url: string, body: Buffer): Promise<void> {
  const check = await get(url);
  if (check.status !== 200 || !check.body.equals(body))
    throw new Error(
      `${name} does not serve the page bytes: ${String(check.status)}, ${String(check.body.length)} bytes vs ${String(body.length)}`,
    );
}
