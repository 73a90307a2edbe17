/**
 * A real Redis Cluster on loopback for the tests and the load test: `redis-server
 * --cluster-enabled yes` × (masters × 2) on free ports, joined with `redis-cli --cluster create
 * … --cluster-replicas 1`. No persistence, a short node timeout (fast failovers), and the means to
 * fail a node the ways production does: SIGKILL, SIGSTOP, a flush, an empty restart.
 *
 * Development tooling only: the proxy never starts Redis itself.
 */
import { type ChildProcess, execFile } from 'node:child_process';
import { once } from 'node:events';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort, freePorts } from './free-port.js';
import { spawnRedisServer } from './redis-server.js';

const run = promisify(execFile);

export interface ClusterNode {
  readonly port: number;
  /** `127.0.0.1:<port>`, as `REDIS_CLUSTER_NODES` lists seed nodes. */
  readonly address: string;
}

export interface RedisClusterOptions {
  /** Masters (each with one replica); at least 3, as Redis Cluster requires. Default 3. */
  readonly masters?: number;
  /** `cluster-node-timeout`, ms: how soon a silent master is failed over. Default 1 000. */
  readonly nodeTimeoutMs?: number;
  /** The nodes' ports (masters × 2 of them), e.g. seeds handed out before the cluster exists. */
  readonly ports?: readonly number[];
}

export interface RedisCluster {
  readonly nodes: readonly ClusterNode[];
  /** Comma-separated seed nodes for `REDIS_CLUSTER_NODES`. */
  readonly seeds: string;
  /** The node that serves `key`'s slot as master now (asks the cluster). */
  masterOf(key: string): Promise<ClusterNode>;
  /** The current masters. */
  masters(): Promise<ClusterNode[]>;
  /** SIGKILL one node and wait for its exit. */
  kill(node: ClusterNode): Promise<void>;
  /** SIGSTOP: hangs with its connections open. */
  pause(node: ClusterNode): void;
  resume(node: ClusterNode): void;
  /**
   * Starts a node again on its port with its cluster config (it rejoins, as a replica if it was
   * failed over meanwhile). Its data is gone, as after a restart without persistence.
   */
  restart(node: ClusterNode): Promise<void>;
  /** Resolves once every live node reports `cluster_state:ok` and all slots are served by a live master. */
  waitHealthy(deadlineMs?: number): Promise<void>;
  /** FLUSHALL on every live master. */
  flushAll(): Promise<void>;
  /** Runs a redis-cli command against one node; returns its output. */
  cli(node: ClusterNode, ...args: string[]): Promise<string>;
  stop(): Promise<void>;
}

/**
 * Each node's own directory: a replica's full sync writes the master's snapshot to `dump.rdb` in
 * its directory, and a node started there loads it. Shared, every node restarted "empty" loaded
 * another node's keys and replication id: keys of slots it did not own (which Redis then marks
 * as importing, so that the slot never fails over) and partial resyncs across shards.
 */
function nodeDir(dir: string, port: number): string {
  const own = join(dir, String(port));
  mkdirSync(own, { recursive: true });
  return own;
}

function launch(port: number, busPort: number, dir: string, nodeTimeoutMs: number): Promise<ChildProcess> {
  const own = nodeDir(dir, port);
  // Empty, as after a restart without persistence: no snapshot a full sync left behind.
  rmSync(join(own, 'dump.rdb'), { force: true });
  return spawnRedisServer([
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--protected-mode',
    'no',
    '--save',
    '',
    '--appendonly',
    'no',
    '--cluster-enabled',
    'yes',
    // Chosen, not port + 10 000: that one may be taken, or past 65 535.
    '--cluster-port',
    String(busPort),
    '--cluster-config-file',
    join(own, 'nodes.conf'),
    '--cluster-node-timeout',
    String(nodeTimeoutMs),
    // A replica whose master is unreachable may fail over however long it was disconnected.
    '--cluster-replica-validity-factor',
    '0',
    // As docs/scaling-out.md#a-redis-cluster asks of a cache's cluster: the masters that are up keep serving their slots
    // while one is failing over (with `yes`, every node answers CLUSTERDOWN meanwhile).
    '--cluster-require-full-coverage',
    'no',
    '--dir',
    own,
    '--loglevel',
    'notice',
  ]);
}

interface LaunchedNode {
  readonly port: number;
  readonly busPort: number;
  readonly child: ChildProcess;
}

async function launchOnFreePort(dir: string, nodeTimeoutMs: number): Promise<LaunchedNode> {
  for (let attempt = 0; ; attempt++) {
    const [port = 0, busPort = 0] = await freePorts(2);
    try {
      return { port, busPort, child: await launch(port, busPort, dir, nodeTimeoutMs) };
    } catch (error) {
      if (attempt >= 4) throw error; // the port was taken between probe and launch: try another
    }
  }
}

function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A node on a port chosen beforehand, its bus on a free port that is not one of the `reserved`
 * ones (free too, until their node listens).
 */
async function launchOnFixedPort(
  port: number,
  reserved: readonly number[],
  dir: string,
  nodeTimeoutMs: number,
): Promise<LaunchedNode> {
  for (let attempt = 0; ; attempt++) {
    let busPort = await freePort();
    while (reserved.includes(busPort)) busPort = await freePort();
    try {
      return { port, busPort, child: await launch(port, busPort, dir, nodeTimeoutMs) };
    } catch (error) {
      if (attempt >= 4) throw error;
    }
  }
}

/** `count` nodes, each on its port of `fixed` if given, else on a free one; all at once. */
function launchNodes(
  count: number,
  dir: string,
  nodeTimeoutMs: number,
  fixed: readonly number[] | undefined,
): Promise<LaunchedNode[]> {
  return Promise.all(
    Array.from({ length: count }, (_, i) => {
      const port = fixed?.[i];
      return port === undefined
        ? launchOnFreePort(dir, nodeTimeoutMs)
        : launchOnFixedPort(port, fixed ?? [], dir, nodeTimeoutMs);
    }),
  );
}

async function redisCli(port: number, ...args: string[]): Promise<string> {
  const { stdout } = await run('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { timeout: 5_000 });
  return stdout;
}

/** One node as `CLUSTER NODES` describes it: its port, role, whether it is failed, its slot ranges. */
interface NodeView {
  readonly port: number;
  readonly master: boolean;
  readonly failed: boolean;
  readonly slots: ReadonlyArray<readonly [number, number]>;
}

/** `CLUSTER SHARDS`-free parse of `CLUSTER NODES`: port → role and slots. */
function parseClusterNodes(text: string): NodeView[] {
  return text
    .trim()
    .split('\n')
    .map((line) => {
      const [, address = '', flags = '', , , , , , ...slots] = line.split(' ');
      const port = Number(address.split('@')[0]?.split(':')[1]);
      return {
        port,
        master: flags.split(',').includes('master'),
        failed: /fail|noaddr/.test(flags),
        slots: slots
          .filter((s) => !s.startsWith('['))
          .map((s) => {
            const [from = '0', to = from] = s.split('-');
            return [Number(from), Number(to)] as const;
          }),
      };
    });
}

const slotCount = (view: NodeView): number => view.slots.reduce((sum, [from, to]) => sum + to - from + 1, 0);

/** The running nodes of one cluster, and what the handle's operations share. */
class ClusterProcesses {
  readonly nodes: readonly ClusterNode[];
  readonly #children: Map<number, ChildProcess>;
  readonly #busPorts: Map<number, number>;
  readonly #paused = new Set<number>();
  /** The nodes' directories (see nodeDir). */
  readonly dir: string;
  readonly nodeTimeoutMs: number;

  constructor(launched: readonly LaunchedNode[], dir: string, nodeTimeoutMs: number) {
    this.dir = dir;
    this.nodeTimeoutMs = nodeTimeoutMs;
    this.nodes = launched.map(({ port }) => ({ port, address: `127.0.0.1:${String(port)}` }));
    this.#children = new Map(launched.map(({ port, child }) => [port, child]));
    this.#busPorts = new Map(launched.map(({ port, busPort }) => [port, busPort]));
  }

  /** The nodes running and not paused. */
  live(): ClusterNode[] {
    return this.nodes.filter((node) => {
      const child = this.#children.get(node.port);
      return child !== undefined && alive(child) && !this.#paused.has(node.port);
    });
  }

  /** The cluster's view of its nodes, from the first live node that answers. */
  async topology(): Promise<NodeView[]> {
    for (const node of this.live()) {
      try {
        return parseClusterNodes(await redisCli(node.port, 'cluster', 'nodes'));
      } catch {
        // that node is going away: ask another
      }
    }
    throw new Error('no live cluster node answers');
  }

  async kill(node: ClusterNode): Promise<void> {
    const child = this.#children.get(node.port);
    if (child === undefined || !alive(child)) return;
    const exited = once(child, 'exit');
    child.kill('SIGCONT');
    child.kill('SIGKILL');
    this.#paused.delete(node.port);
    await exited;
  }

  pause(node: ClusterNode): void {
    this.#children.get(node.port)?.kill('SIGSTOP');
    this.#paused.add(node.port);
  }

  resume(node: ClusterNode): void {
    this.#children.get(node.port)?.kill('SIGCONT');
    this.#paused.delete(node.port);
  }

  async restart(node: ClusterNode): Promise<void> {
    await this.kill(node);
    const busPort = this.#busPorts.get(node.port) ?? node.port + 10_000;
    this.#children.set(node.port, await launch(node.port, busPort, this.dir, this.nodeTimeoutMs));
  }
}

async function masterOf(cluster: ClusterProcesses, key: string): Promise<ClusterNode> {
  const asked = cluster.live()[0] ?? cluster.nodes[0];
  if (asked === undefined) throw new Error('the cluster has no nodes');
  const slot = Number((await redisCli(asked.port, 'cluster', 'keyslot', key)).trim());
  const owner = (await cluster.topology()).find(
    (n) => n.master && !n.failed && n.slots.some(([from, to]) => slot >= from && slot <= to),
  );
  const node = cluster.nodes.find((n) => n.port === owner?.port);
  if (node === undefined) throw new Error(`no master serves slot ${String(slot)}`);
  return node;
}

async function currentMasters(cluster: ClusterProcesses): Promise<ClusterNode[]> {
  const ports = new Set(
    (await cluster.topology()).filter((n) => n.master && !n.failed && n.slots.length > 0).map((n) => n.port),
  );
  return cluster.nodes.filter((node) => ports.has(node.port));
}

/**
 * Healthy: every live node reports `cluster_state:ok` with all 16 384 slots ok, and the masters
 * that serve slots cover all of them and are all live.
 */
async function isHealthy(cluster: ClusterProcesses): Promise<boolean> {
  const states = await Promise.all(cluster.live().map((node) => redisCli(node.port, 'cluster', 'info')));
  const ok =
    states.length > 0 &&
    states.every((info) => info.includes('cluster_state:ok') && info.includes('cluster_slots_ok:16384'));
  if (!ok) return false;
  const masters = (await cluster.topology()).filter((n) => n.master && !n.failed);
  const covered = masters.reduce((sum, n) => sum + slotCount(n), 0);
  const liveMasters = masters.every((m) => m.slots.length === 0 || cluster.live().some((node) => node.port === m.port));
  return covered === 16_384 && liveMasters;
}

async function waitHealthy(cluster: ClusterProcesses, deadlineMs: number): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    try {
      if (await isHealthy(cluster)) return;
    } catch {
      // a node is starting or going: ask again
    }
    if (Date.now() > deadline) throw new Error('the Redis Cluster did not become healthy in time');
    await sleep(100);
  }
}

async function stopCluster(cluster: ClusterProcesses): Promise<void> {
  await Promise.all(cluster.nodes.map((node) => cluster.kill(node)));
  rmSync(cluster.dir, { recursive: true, force: true });
}

/** The handle the tests and the bench hold; its operations may be passed around detached. */
function handleOf(cluster: ClusterProcesses): RedisCluster {
  return {
    nodes: cluster.nodes,
    seeds: cluster.nodes.map((node) => node.address).join(','),
    cli: (node, ...args) => redisCli(node.port, ...args),
    masterOf: (key) => masterOf(cluster, key),
    masters: () => currentMasters(cluster),
    kill: (node) => cluster.kill(node),
    pause: (node) => cluster.pause(node),
    resume: (node) => cluster.resume(node),
    restart: (node) => cluster.restart(node),
    waitHealthy: (deadlineMs = 30_000) => waitHealthy(cluster, deadlineMs),
    flushAll: async () => {
      await Promise.all((await currentMasters(cluster)).map((node) => redisCli(node.port, 'flushall')));
    },
    stop: () => stopCluster(cluster),
  };
}

/** Joins the nodes into one cluster, each master with one replica (`redis-cli --cluster create` picks which). */
async function createCluster(nodes: readonly ClusterNode[]): Promise<void> {
  await run(
    'redis-cli',
    ['--cluster', 'create', ...nodes.map((n) => n.address), '--cluster-replicas', '1', '--cluster-yes'],
    { timeout: 30_000 },
  );
}

export async function startRedisCluster(options: RedisClusterOptions = {}): Promise<RedisCluster> {
  const masters = options.masters ?? 3;
  const nodeTimeoutMs = options.nodeTimeoutMs ?? 1_000;
  if (masters < 3) throw new TypeError('a Redis Cluster needs at least 3 masters');
  const fixed = options.ports;
  if (fixed !== undefined && fixed.length !== masters * 2)
    throw new TypeError(`a cluster of ${String(masters)} masters needs ${String(masters * 2)} ports`);
  const dir = mkdtempSync(join(tmpdir(), 'slab-redis-cluster-'));
  const cluster = new ClusterProcesses(await launchNodes(masters * 2, dir, nodeTimeoutMs, fixed), dir, nodeTimeoutMs);
  const handle = handleOf(cluster);
  try {
    await createCluster(cluster.nodes);
    await handle.waitHealthy();
  } catch (error) {
    await handle.stop();
    throw error;
  }
  return handle;
}
