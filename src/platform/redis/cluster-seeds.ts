/**
 * The seed nodes a Redis Cluster client starts over from: after failovers and restarts, the nodes
 * an operator listed may be replicas, gone, or back under new roles. ioredis connects
 * from its seed list and, when it starts over (after the cluster was lost, or by the watchdog in
 * `src/platform/redis/connection.ts`), uses that list again. This keeps it fresh from the cluster's own view:
 *
 * - the configured seeds, each host name expanded to every address it resolves to (a Kubernetes
 *   headless Service names every pod: `redis-cluster:6379` is all of them, where ioredis's own
 *   lookup takes one address, which may be the pod that is down);
 * - every node of the last slot map read (masters and replicas), so that a client whose listed
 *   seeds all went away still finds the cluster through the nodes it learnt of.
 *
 * Any of them will do: every node of a cluster, whatever its role, answers `CLUSTER SLOTS`.
 */
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { Cluster } from 'ioredis';

export interface SeedNode {
  readonly host: string;
  readonly port: number;
}

/** `host:port` (validated by the config) as a node; the host may be an IPv6 address. */
export function parseSeed(text: string): SeedNode {
  const colon = text.lastIndexOf(':');
  const host = text.slice(0, colon).replace(/^\[(.*)\]$/, '$1');
  return { host, port: Number(text.slice(colon + 1)) };
}

/** Every address a host name resolves to (an IP address is itself). */
export type ResolveAll = (host: string) => Promise<readonly string[]>;

const resolveWithDns: ResolveAll = async (host) =>
  isIP(host) === 0 ? (await lookup(host, { all: true })).map((entry) => entry.address) : [host];

/**
 * ioredis keeps the seed list in a private field that `connect()` reads at every start over; it is
 * written through this narrow view. `test/unit/cluster-seeds.test.ts` holds ioredis to that shape.
 */
interface SeededCluster {
  startupNodes: SeedNode[];
}

function nodeKey(node: SeedNode): string {
  return `${node.host}:${String(node.port)}`;
}

function unique(nodes: Iterable<SeedNode>): SeedNode[] {
  const byKey = new Map<string, SeedNode>();
  for (const node of nodes) if (!byKey.has(nodeKey(node))) byKey.set(nodeKey(node), node);
  return [...byKey.values()];
}

export class ClusterSeeds {
  readonly #configured: readonly SeedNode[];
  readonly #resolveAll: ResolveAll;
  /** The configured host names' addresses, as last resolved. */
  #resolved: readonly SeedNode[] = [];
  /** The nodes of the last slot map read. */
  #learnt: readonly SeedNode[] = [];

  constructor(configured: readonly string[], resolveAll: ResolveAll = resolveWithDns) {
    this.#configured = configured.map(parseSeed);
    this.#resolveAll = resolveAll;
  }

  /** What ioredis is given at first: the configured seeds as they are. */
  get initial(): SeedNode[] {
    return [...this.#configured];
  }

  /** The list to start over from: configured, resolved, learnt; each node once. */
  current(): SeedNode[] {
    return unique([...this.#configured, ...this.#resolved, ...this.#learnt]);
  }

  /** Remembers the nodes of the slot map just read. */
  learn(nodes: readonly SeedNode[]): void {
    if (nodes.length > 0) this.#learnt = unique(nodes);
  }

  /** Resolves the configured host names again; a name that does not resolve now keeps no address. */
  async resolve(): Promise<void> {
    const resolved = await Promise.all(
      this.#configured.map(async (seed) => {
        try {
          return (await this.#resolveAll(seed.host)).map((host) => ({ host, port: seed.port }));
        } catch {
          return [];
        }
      }),
    );
    this.#resolved = resolved.flat();
  }

  /** Keeps `cluster`'s seed list fresh: learns every slot map it reads, and writes the list back. */
  attach(cluster: Cluster): void {
    cluster.on('refresh', () => {
      this.learn(
        cluster.nodes('all').flatMap((redis) => {
          const { host, port } = redis.options;
          return host === undefined || port === undefined ? [] : [{ host, port }];
        }),
      );
      this.applyTo(cluster);
    });
  }

  /** Writes the current list into the client, for its next start over. */
  applyTo(cluster: Cluster): void {
    (cluster as unknown as SeededCluster).startupNodes = this.current();
  }
}
