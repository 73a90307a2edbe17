/**
 * A real `redis-server` for tests, on a free port (never 6379, never a fixed port), with no
 * persistence unless asked for. It can be killed, paused (SIGSTOP) and resumed, and restarted on
 * the same port (empty, or from its append-only file).
 */
import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import { freePort } from '../support/free-port.js';
import { spawnRedisServer } from '../support/redis-server.js';

export interface RedisServer {
  readonly port: number;
  readonly url: string;
  /** SIGKILL, and wait for the exit. */
  kill(): Promise<void>;
  /** SIGSTOP: the server hangs with its connections open. */
  pause(): void;
  resume(): void;
  /** Starts again on the same port (after `kill`). */
  restart(): Promise<void>;
  stop(): Promise<void>;
}

export interface RedisServerOptions {
  /**
   * Persistence: an append-only file in this directory, written on every command (as the operator state's
   * Redis should be: docs/scaling-out.md#the-operator-state-and-what-survives-what), so that a kill and a
   * restart lose nothing.
   */
  readonly appendOnlyDir?: string;
}

function launch(port: number, options: RedisServerOptions): Promise<ChildProcess> {
  const persistence =
    options.appendOnlyDir === undefined
      ? ['--appendonly', 'no']
      : ['--appendonly', 'yes', '--appendfsync', 'always', '--dir', options.appendOnlyDir];
  return spawnRedisServer([
    '--port',
    String(port),
    '--bind',
    '127.0.0.1',
    '--save',
    '',
    ...persistence,
    '--protected-mode',
    'no',
    '--loglevel',
    'notice',
  ]);
}

export async function startRedis(options: RedisServerOptions = {}): Promise<RedisServer> {
  let port = 0;
  let child: ChildProcess | undefined;
  for (let attempt = 0; child === undefined; attempt++) {
    port = await freePort();
    try {
      child = await launch(port, options);
    } catch (error) {
      if (attempt >= 4) throw error; // the port was taken between probe and launch: try another
    }
  }
  let current: ChildProcess = child;
  const killCurrent = async (): Promise<void> => {
    if (current.exitCode !== null || current.signalCode !== null) return;
    const exited = once(current, 'exit');
    current.kill('SIGCONT');
    current.kill('SIGKILL');
    await exited;
  };
  return {
    port,
    url: `redis://127.0.0.1:${port}`,
    kill: killCurrent,
    pause: () => current.kill('SIGSTOP'),
    resume: () => current.kill('SIGCONT'),
    async restart() {
      await killCurrent();
      current = await launch(port, options);
    },
    stop: killCurrent,
  };
}

/**
 * Resolves when an ioredis client is (or becomes) ready. Unlike `events.once(client, 'ready')`, a
 * connection error on the way (a refused reconnection while a test restarts Redis) does not
 * reject: the client keeps retrying, and the test waits for the outcome it is about.
 */
export function clientReady(client: {
  readonly status: string;
  once(event: 'ready', listener: () => void): unknown;
}): Promise<void> {
  if (client.status === 'ready') return Promise.resolve();
  return new Promise((resolve) => {
    client.once('ready', () => resolve());
  });
}

/** How many times Redis has run `command` (`INFO commandstats`), as the client given sees it. */
export async function commandCalls(
  client: { info(section: 'commandstats'): Promise<string> },
  command: string,
): Promise<number> {
  const stats = await client.info('commandstats');
  return Number(new RegExp(`cmdstat_${command}:calls=(\\d+)`).exec(stats)?.[1] ?? 0);
}

/**
 * Deletes every key of the cache (entries, generations, leases, the limits' counters) and keeps the
 * rest: the operator state and the upstream budget's ledger. Between tests, instead of FLUSHALL: a
 * proxy started next reads the operator state already settled there and serves at once, where on
 * an emptied Redis it waits for a new one to settle (src/control/operator-control.ts).
 */
export async function emptyCache(url: string): Promise<void> {
  const admin = new Redis(url);
  try {
    let cursor = '0';
    do {
      const [next, keys] = await admin.scan(cursor, 'COUNT', 1000);
      cursor = next;
      const cache = keys.filter((key) => !key.startsWith('{slab:budget}') && !key.startsWith('{slab:ctl}'));
      if (cache.length > 0) await admin.del(...cache);
    } while (cursor !== '0');
  } finally {
    admin.disconnect();
  }
}
