/**
 * Proxy replicas as separate processes (`node dist/main.js`), sharing one Redis: the multi-process
 * suites' common start-up, and a bounded poll for conditions that have no event to await.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { send } from './http.js';
import { type RunningProcess, runNode } from './process.js';

export interface Replica {
  readonly process: RunningProcess;
  readonly url: string;
  readonly adminUrl: string;
}

/** Polls an observable condition until it holds; fails after the deadline instead of hanging. */
export async function until(
  condition: () => boolean | Promise<boolean>,
  what: string,
  deadlineMs = 8_000,
): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!(await condition())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** True when the replica's readiness reports Redis usable. */
export function redisOk(replica: Replica): Promise<boolean> {
  return send(replica.adminUrl, '/readyz').then(
    (ready) => ready.status === 200 && (ready.json() as { redis?: string }).redis === 'ok',
    () => false,
  );
}

/**
 * Resolves once every replica counts `count` replicas through Redis (`/readyz`'s `replicas`): what
 * its local share is made of while Redis is unusable (src/platform/redis/replica-count.ts). Each
 * counts at its start and then every 2 s, so one started a moment before the others may count
 * fewer for that long.
 */
export async function replicasCounted(replicas: readonly Replica[], count = replicas.length): Promise<void> {
  const counts = (): Promise<Array<number | undefined>> =>
    Promise.all(
      replicas.map((replica) =>
        send(replica.adminUrl, '/readyz').then(
          (ready) => (ready.json() as { replicas?: number }).replicas,
          () => undefined,
        ),
      ),
    );
  await until(async () => (await counts()).every((n) => n === count), `every replica to count ${String(count)}`);
}

/** Where the replica's upstream budget takes slots from now (`/readyz`'s `upstream_budget`). */
export async function budgetMode(replica: Replica): Promise<string | undefined> {
  const ready = await send(replica.adminUrl, '/readyz').catch(() => undefined);
  return (ready?.json() as { upstream_budget?: string } | undefined)?.upstream_budget;
}

export interface ReplicaEnv {
  readonly UPSTREAM_URL: string;
  /** One of the two: a single Redis, or a Redis Cluster's seed nodes. */
  readonly REDIS_URL?: string;
  readonly REDIS_CLUSTER_NODES?: string;
  /** A Redis of its own for the operator state. */
  readonly CONTROL_REDIS_URL?: string;
  readonly JWT_SECRET: string;
  readonly CONFIG_FILE?: string;
  readonly ADMIN_TOKEN?: string;
  readonly DRAIN_SECONDS?: string;
  readonly SHUTDOWN_DELAY_SECONDS?: string;
}

/**
 * Starts a replica on free ports and waits until it serves with Redis connected (or, with
 * `waitForRedis: false`, until it serves at all: Redis may be down on purpose).
 */
export async function startReplica(
  env: ReplicaEnv,
  options: { readonly waitForRedis?: boolean } = {},
): Promise<Replica> {
  const defined = Object.fromEntries(
    Object.entries(env).filter((pair): pair is [string, string] => pair[1] !== undefined),
  );
  const child = runNode('dist/main.js', {
    PORT: '0',
    ADMIN_PORT: '0',
    HOST: '127.0.0.1',
    LOG_LEVEL: 'info',
    ...defined,
  });
  const [, port, adminPort] = await child.waitFor(/"port":(\d+),"adminPort":(\d+)/);
  const replica = {
    process: child,
    url: `http://127.0.0.1:${String(port)}`,
    adminUrl: `http://127.0.0.1:${String(adminPort)}`,
  };
  // Without Redis the first requests would (correctly) fail open, each replica on its own.
  if (options.waitForRedis !== false) await until(() => redisOk(replica), 'the replica to report redis ok');
  return replica;
}

/** Writes a config file (YAML over the defaults) for replicas; returns its path. */
export function replicaConfig(configYaml: string): string {
  const configFile = join(mkdtempSync(join(tmpdir(), 'slab-replicas-')), 'config.yaml');
  writeFileSync(configFile, configYaml);
  return configFile;
}

/** Starts `count` replicas sharing one config file. */
export async function startReplicas(
  count: number,
  env: Omit<ReplicaEnv, 'CONFIG_FILE'>,
  configYaml: string,
): Promise<Replica[]> {
  const configFile = replicaConfig(configYaml);
  return Promise.all(Array.from({ length: count }, () => startReplica({ ...env, CONFIG_FILE: configFile })));
}

/**
 * The `rateLimit` section for suites about something else than the inbound limits: limits no
 * suite meets, and the replica count each one's local share is computed for.
 */
export function unmetLimits(replicas: number): string {
  return [
    'rateLimit:',
    '  perCredential: { points: 10000000, duration: 60 }',
    '  perCompany: { points: 10000000, duration: 60 }',
    `  replicas: ${String(replicas)}`,
    '',
  ].join('\n');
}
