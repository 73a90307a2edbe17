/**
 * The proxy's Redis command timeout (src/platform/redis/command-timeout.ts), on a real Redis: a
 * Redis that does not answer fails the command with `Command timed out`; a reply that arrived while
 * the event loop was held up past the timeout is read, not timed out — where ioredis's own
 * `commandTimeout`, in the same sequence, fails a command that Redis answered (why the module
 * exists: should an ioredis release fix it, this says so). Every command is armed, those of a
 * pipeline too, and a client made by `createRedisClient` is armed without anything of ioredis's
 * replaced.
 */
import { Command, Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CommandTimeouts, isCommandTimeout } from '../../src/platform/redis/command-timeout.js';
import { createRedisClient, type RedisClient } from '../../src/platform/redis/connection.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';

const TIMEOUT_MS = 50;
/** Longer than the timeout: the event loop held up by synchronous work, as under a burst. */
const HELD_UP_MS = 4 * TIMEOUT_MS;

let redis: RedisServer;
const clients: RedisClient[] = [];

beforeAll(async () => {
  redis = await startRedis();
});
afterAll(async () => {
  for (const client of clients) client.disconnect();
  await redis.stop();
});

/** A plain ioredis client as the proxy's are made, with `timeoutMs` armed by the module. */
async function armedClient(timeoutMs = TIMEOUT_MS): Promise<Redis> {
  const client = new Redis(redis.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, lazyConnect: true });
  clients.push(client);
  new CommandTimeouts(timeoutMs).arm(client);
  await client.connect();
  return client;
}

/** Resolves once the command just issued has been written to the socket (the next check phase). */
function written(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/** Holds the event loop for `ms` of synchronous work: Redis's reply arrives meanwhile. */
function holdUp(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // the event loop waits, as behind a burst of requests parsed in one turn
  }
}

/** A read whose reply arrives while the event loop is held up past the timeout: its outcome. */
async function readWhileHeldUp(client: RedisClient): Promise<unknown> {
  await client.set('held-up', 'answered');
  const reply = client.get('held-up');
  await written();
  holdUp(HELD_UP_MS);
  return outcome(reply);
}

async function outcome(pending: Promise<unknown>): Promise<unknown> {
  try {
    return await pending;
  } catch (error) {
    return isCommandTimeout(error) ? 'timed out' : error;
  }
}

describe('a command timeout a held-up event loop cannot fake', () => {
  it('reads a reply that arrived while the event loop was held up past the timeout', async () => {
    expect(await readWhileHeldUp(await armedClient())).toBe('answered');
  });

  it("where ioredis's own commandTimeout, in the same sequence, fails a command Redis answered", async () => {
    const client = new Redis(redis.url, { commandTimeout: TIMEOUT_MS, lazyConnect: true });
    clients.push(client);
    await client.connect();
    expect(await readWhileHeldUp(client)).toBe('timed out');
  });

  it('fails a command Redis does not answer, and a pipeline’s commands too', async () => {
    const client = await armedClient();
    redis.pause();
    try {
      const single = outcome(client.get('held-up'));
      // A pipeline answers each command's error beside it.
      const pipelined = client
        .pipeline()
        .get('held-up')
        .exec()
        .then((results) => results?.map(([error]) => (isCommandTimeout(error) ? 'timed out' : error)));
      expect(await single).toBe('timed out');
      expect(await pipelined).toEqual(['timed out']);
    } finally {
      redis.resume();
    }
    expect(await client.ping()).toBe('PONG');
  });

  it('arms a command once, however often it is sent, and clears its timer when it is answered', async () => {
    vi.useFakeTimers();
    try {
      const sent: Command[] = [];
      const sender = { sendCommand: (command: Command): void => void sent.push(command) };
      new CommandTimeouts(TIMEOUT_MS).arm(sender);
      const command = new Command('get', ['k']);
      sender.sendCommand(command);
      // Sent again, as a cluster sends a redirected command: still one timer.
      sender.sendCommand(command);
      expect(sent).toEqual([command, command]);
      expect(vi.getTimerCount()).toBe(1);
      command.resolve('v');
      await command.promise;
      expect(vi.getTimerCount()).toBe(0);
    } finally {
      vi.useRealTimers();
    }
  });

  it("arms every client createRedisClient makes, and replaces nothing of ioredis's", async () => {
    const before = Command.prototype.setTimeout;
    const client = createRedisClient({ url: redis.url, commandTimeoutMs: TIMEOUT_MS });
    clients.push(client);
    await new Promise<void>((resolve) => client.once('ready', () => resolve()));
    expect(Command.prototype.setTimeout).toBe(before);
    expect(Object.hasOwn(client, 'sendCommand')).toBe(true); // the client's own door, armed
    expect(await readWhileHeldUp(client)).toBe('answered');
    redis.pause();
    try {
      expect(await outcome(client.get('held-up'))).toBe('timed out');
    } finally {
      redis.resume();
    }
  });
});
