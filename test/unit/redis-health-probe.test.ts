/**
 * A node that was late once is used again as soon as it answers (src/platform/redis/connection.ts,
 * `RedisHealth`): after a timeout the breaker asks the node `PING` and ends the skip when one is
 * answered in time; a node that stays silent stays skipped, past its skip, until it answers. A fake Redis on loopback that can hold
 * its replies plays the node: `hold()` is a node not scheduled for a moment (its replies wait),
 * `release()` sends what it held. Both a single Redis and a one-node Redis Cluster (the breaker
 * finds the cluster's connection to the node).
 */
import { createServer, type Server, type Socket } from 'node:net';
import { Cluster } from 'ioredis';
import { afterEach, describe, expect, it } from 'vitest';
import { isCommandTimeout } from '../../src/platform/redis/command-timeout.js';
import { createRedisClient, type RedisClient } from '../../src/platform/redis/connection.js';
import { RedisHealth } from '../../src/platform/redis/health.js';

const TIMEOUT_MS = 50;
const SUSPEND_MS = 10_000; // far longer than the test: only a probe can end the skip

interface FakeRedis {
  readonly port: number;
  /** Commands received, by name. */
  readonly received: Map<string, number>;
  hold(): void;
  release(): void;
  close(): Promise<void>;
}

const bulk = (text: string): string => `$${String(Buffer.byteLength(text))}\r\n${text}\r\n`;

/** RESP arrays of bulk strings in, the few answers ioredis needs out. */
async function startFakeRedis(): Promise<FakeRedis> {
  let held: (() => void)[] | undefined;
  const received = new Map<string, number>();
  const sockets = new Set<Socket>();
  let port = 0;
  const answer = (args: string[]): string => {
    const name = (args[0] ?? '').toLowerCase();
    const sub = (args[1] ?? '').toLowerCase();
    if (name === 'ping') return '+PONG\r\n';
    if (name === 'info') return bulk('# Server\r\nloading:0\r\n');
    if (name === 'cluster' && sub === 'slots')
      return `*1\r\n*3\r\n:0\r\n:16383\r\n*3\r\n${bulk('127.0.0.1')}:${String(port)}\r\n${bulk('fake-node-id')}`;
    if (name === 'get') return '$-1\r\n';
    return '+OK\r\n';
  };
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.on('close', () => sockets.delete(socket));
    socket.on('error', () => socket.destroy());
    let buffer = '';
    socket.on('data', (chunk: Buffer) => {
      buffer += chunk.toString('utf8');
      for (;;) {
        const parsed = parseCommand(buffer);
        if (parsed === undefined) return;
        buffer = buffer.slice(parsed.length);
        const name = (parsed.args[0] ?? '').toLowerCase();
        received.set(name, (received.get(name) ?? 0) + 1);
        const reply = answer(parsed.args);
        const send = (): void => {
          if (!socket.destroyed) socket.write(reply);
        };
        if (held === undefined) send();
        else held.push(send);
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  if (address === null || typeof address === 'string') throw new Error('no port');
  port = address.port;
  return {
    port,
    received,
    hold: () => {
      held ??= [];
    },
    release: () => {
      const waiting = held ?? [];
      held = undefined;
      for (const send of waiting) send();
    },
    close: () => {
      for (const socket of sockets) socket.destroy();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function parseCommand(text: string): { args: string[]; length: number } | undefined {
  if (!text.startsWith('*')) return undefined;
  let at = text.indexOf('\r\n');
  if (at < 0) return undefined;
  const count = Number(text.slice(1, at));
  at += 2;
  const args: string[] = [];
  for (let i = 0; i < count; i++) {
    const end = text.indexOf('\r\n', at);
    if (end < 0) return undefined;
    const size = Number(text.slice(at + 1, end));
    if (text.length < end + 2 + size + 2) return undefined;
    args.push(text.slice(end + 2, end + 2 + size));
    at = end + 2 + size + 2;
  }
  return { args, length: at };
}

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

async function until(condition: () => boolean, deadlineMs = 2_000): Promise<void> {
  const deadline = Date.now() + deadlineMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await sleep(5);
  }
}

let cleanups: (() => Promise<void> | void)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
  cleanups = [];
});

async function setup(topology: 'single' | 'cluster') {
  const redis = await startFakeRedis();
  cleanups.push(() => redis.close());
  const client: RedisClient = createRedisClient({
    ...(topology === 'single'
      ? { url: `redis://127.0.0.1:${String(redis.port)}` }
      : { clusterNodes: [`127.0.0.1:${String(redis.port)}`] }),
    commandTimeoutMs: TIMEOUT_MS,
  });
  cleanups.push(() => client.disconnect());
  await until(() => client.status === 'ready');
  if (client instanceof Cluster) await until(() => client.nodes('master').every((node) => node.status === 'ready'));
  const health = new RedisHealth(client, { suspendMs: SUSPEND_MS });
  /** A GET on `key` that the node does not answer in time, reported to the breaker as the store does. */
  const timeOut = async (key: string): Promise<void> => {
    redis.hold();
    const error = await client.get(key).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(isCommandTimeout(error)).toBe(true);
    health.failed(key, error);
  };
  return { redis, client, health, timeOut };
}

describe.each(['single', 'cluster'] as const)('the node breaker on %s Redis, after a timeout', (topology) => {
  it('uses the node again as soon as it answers a PING in time, long before its skip would end', async () => {
    const { redis, health, timeOut } = await setup(topology);
    await timeOut('{1:a}:page');
    expect(health.usable('{1:a}:page')).toBe(false);
    expect(health.state()).toBe('degraded');
    redis.release(); // the node was only late: it answers what it holds, the probe included
    await until(() => health.usable('{1:a}:page'), 1_000);
    expect(health.state()).toBe('ok');
    expect(redis.received.get('ping') ?? 0).toBeGreaterThanOrEqual(1);
  });

  it('keeps a node that stays silent skipped, asking it again after each PING that times out', async () => {
    const { redis, health, timeOut } = await setup(topology);
    const pingsBefore = redis.received.get('ping') ?? 0;
    const probes = (): number => (redis.received.get('ping') ?? 0) - pingsBefore;
    const timedOutAt = performance.now();
    await timeOut('{1:a}:page');
    // Asked again after a PING that timed out: a third PING came.
    await until(() => probes() >= 3);
    expect(health.usable('{1:a}:page')).toBe(false);
    // One at a time, each after the last timed out: never more than one per command timeout since
    // the first (a slow host sends fewer, never more).
    expect(probes()).toBeLessThanOrEqual(1 + Math.floor((performance.now() - timedOutAt) / TIMEOUT_MS));
    redis.release();
    await until(() => health.usable('{1:a}:page'), 1_000);
  });

  it('keeps a silent node skipped past its skip, for as long as its PINGs time out', async () => {
    const { redis, client } = await setup(topology);
    const health = new RedisHealth(client, { suspendMs: TIMEOUT_MS * 2 });
    redis.hold();
    const error = await client.get('{1:a}:page').then(
      () => undefined,
      (e: unknown) => e,
    );
    const skippedAt = performance.now();
    const pingsBefore = redis.received.get('ping') ?? 0;
    health.failed('{1:a}:page', error);
    // Two skips' worth on, PINGs sent after the first skip ended still unanswered.
    await until(
      () => performance.now() - skippedAt > TIMEOUT_MS * 4 && (redis.received.get('ping') ?? 0) - pingsBefore >= 4,
    );
    expect(health.usable('{1:a}:page')).toBe(false);
    redis.release();
    await until(() => health.usable('{1:a}:page'), 1_000);
  });

  it('does not probe after an error that is not a timeout: the skip runs its course', async () => {
    const { redis, health } = await setup(topology);
    const pingsBefore = redis.received.get('ping') ?? 0;
    health.failed('{1:a}:page', new Error('Connection is closed.'));
    await sleep(TIMEOUT_MS * 3);
    expect(health.usable('{1:a}:page')).toBe(false);
    expect((redis.received.get('ping') ?? 0) - pingsBefore).toBe(0);
  });
});
