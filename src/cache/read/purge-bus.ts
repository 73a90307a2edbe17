/**
 * Purges and invalidations reaching every replica (docs/operations.md#the-operator-api): the
 * store's new generation or marks already hold in Redis; this tells the other replicas to stop
 * serving their L1 copies of what changed at once. Each announcement carries the next number of
 * one sequence kept in Redis, so that a replica can tell that it heard them all (change-channel.ts):
 * the L1's copies then serve without asking Redis. The read service announces its own and
 * subscribes to them (as Kong's proxy-cache does): nobody else fans them out.
 */
import { createHash, randomUUID } from 'node:crypto';
import { ReplyError } from 'ioredis';
import { isResourceName, type ResourceName } from '../../catalog/resources.js';
import type { RedisClient } from '../../platform/redis/connection.js';
import type { RedisHealth } from '../../platform/redis/health.js';
import type { SequenceReading } from './change-channel.js';

/**
 * A purge (every entry of the company's resource, or of all its resources, a miss), or an
 * invalidation (its pages stale from `mark` on: docs/cache.md#soft-invalidation).
 */
export type CacheAnnouncement =
  | { readonly kind: 'purge'; readonly company: string; readonly resource: ResourceName | undefined }
  | {
      readonly kind: 'invalidate';
      readonly company: string;
      readonly resource: ResourceName | undefined;
      readonly mark: string;
    };

export type PurgeListener = (announcement: CacheAnnouncement) => void;

export interface PurgeBus {
  /** Tells every replica (this one included); resolves false when Redis could not take it. */
  announce(announcement: CacheAnnouncement): Promise<boolean>;
  subscribe(listener: PurgeListener): void;
}

/** One process: the announcement is the local call. */
export function createLocalPurgeBus(): PurgeBus {
  const listeners: PurgeListener[] = [];
  return {
    announce(announcement) {
      for (const listener of listeners) listener(announcement);
      return Promise.resolve(true);
    },
    subscribe: (listener) => void listeners.push(listener),
  };
}

/**
 * The wire form: `<company> <resource|*>` for a purge, `~ <company> <resource|*> <mark>` for an
 * invalidation. Company ids hold no space (their grammar is [A-Za-z0-9_-]), nor do marks.
 */
export function encodeAnnouncement(announcement: CacheAnnouncement): string {
  const target = `${announcement.company} ${announcement.resource ?? '*'}`;
  return announcement.kind === 'purge' ? target : `~ ${target} ${announcement.mark}`;
}

export function decodeAnnouncement(message: string): CacheAnnouncement | undefined {
  const parts = message.split(' ');
  const soft = parts[0] === '~';
  const [company = '', name = '*', mark = ''] = soft ? parts.slice(1) : parts;
  if (company === '' || (soft && mark === '')) return undefined;
  const resource = isResourceName(name) ? name : undefined;
  return soft ? { kind: 'invalidate', company, resource, mark } : { kind: 'purge', company, resource };
}

/**
 * An announcement with its number in the fleet's sequence (change-channel.ts): `#<number> ` before
 * the wire form above. A message without one comes from a replica of a release before the
 * sequence: applied, but not counted (its loss could not be noticed).
 */
export function decodeNumbered(message: string): { readonly number: number | undefined; readonly body: string } {
  const numbered = /^#([0-9]{1,15}) /.exec(message);
  return numbered === null
    ? { number: undefined, body: message }
    : { number: Number(numbered[1]), body: message.slice(numbered[0].length) };
}

/**
 * An announcement given the sequence's next number and published with it, in one step on the
 * sequence's key: the numbers are published in the order they are given out.
 */
const ANNOUNCE_SCRIPT = `local n = redis.call('incr', KEYS[1])
redis.call('publish', ARGV[1], '#' .. n .. ' ' .. ARGV[2])
return n`;

/**
 * The sequence's last number (0 before the first), and who keeps it: the run id of the Redis
 * process, a failover or a restart may lose the last numbers given out; and the sequence's epoch,
 * written anew when it is missing, a flush or an eviction may have lost the key with its numbers
 * (a sequence never used and one lost before its first number both read 0). KEYS: the sequence,
 * its epoch. ARGV: the epoch to write when there is none.
 */
const SEQUENCE_SCRIPT = `local last = redis.call('get', KEYS[1])
local epoch = redis.call('get', KEYS[2])
if not epoch then
  epoch = ARGV[1]
  redis.call('set', KEYS[2], epoch)
end
local run = string.match(redis.call('info', 'server'), 'run_id:(%w+)') or ''
return { tonumber(last or '0'), run .. ':' .. epoch }`;

const ANNOUNCE_SHA = createHash('sha1').update(ANNOUNCE_SCRIPT).digest('hex');
const SEQUENCE_SHA = createHash('sha1').update(SEQUENCE_SCRIPT).digest('hex');

export interface RedisPurgeBusOptions {
  readonly client: RedisClient;
  readonly subscriber: RedisClient;
  readonly channel: string;
  /** The key of the fleet's sequence of announcements, and of its epoch (one hash slot). */
  readonly sequenceKey: string;
  readonly epochKey: string;
  /** The cache's breaker per node: a heartbeat that fails says so, and none is sent to a node skipped. */
  readonly health: RedisHealth;
  /** Told of the number of each announcement heard (change-channel.ts). */
  readonly onNumber?: ((number: number) => void) | undefined;
  readonly onError?: ((error: unknown) => void) | undefined;
}

export interface RedisPurgeBus extends PurgeBus {
  /** The sequence as Redis keeps it now; rejects when Redis does not answer. */
  readSequence(): Promise<SequenceReading>;
}

function isNoScript(error: unknown): boolean {
  return error instanceof Error && error.message.startsWith('NOSCRIPT');
}

export function createRedisPurgeBus(options: RedisPurgeBusOptions): RedisPurgeBus {
  const { client, subscriber, channel, sequenceKey, epochKey } = options;
  const listeners: PurgeListener[] = [];
  const deliver: PurgeListener = (announcement) => {
    for (const listener of listeners) listener(announcement);
  };
  // By its hash, and by its text where the node does not have it yet (a new node, a failover).
  const script = (text: string, sha: string, ...args: string[]): Promise<unknown> =>
    client
      .evalsha(sha, 2, sequenceKey, epochKey, ...args)
      .catch((error: unknown) =>
        isNoScript(error) ? client.eval(text, 2, sequenceKey, epochKey, ...args) : Promise.reject(error),
      );
  subscriber.on('message', (from: string, message: string) => {
    if (from !== channel) return;
    const { number, body } = decodeNumbered(message);
    const announcement = decodeAnnouncement(body);
    if (announcement !== undefined) deliver(announcement);
    if (number !== undefined) options.onNumber?.(number);
  });
  subscriber.subscribe(channel).catch((error: unknown) => options.onError?.(error));
  return {
    async announce(announcement) {
      deliver(announcement); // this replica at once, whatever Redis does
      try {
        await script(ANNOUNCE_SCRIPT, ANNOUNCE_SHA, channel, encodeAnnouncement(announcement));
        return true;
      } catch (error) {
        options.onError?.(error);
        return false;
      }
    },
    subscribe: (listener) => void listeners.push(listener),
    async readSequence() {
      if (!options.health.usable(sequenceKey)) throw new Error('the node keeping the change sequence is skipped');
      const reply = await script(SEQUENCE_SCRIPT, SEQUENCE_SHA, randomUUID()).catch((error: unknown) => {
        // A hung or lost Redis found by the heartbeat is skipped by every read at once, as after a
        // lookup; an error reply (a sequence of another type) says nothing of the node.
        if (!(error instanceof ReplyError)) options.health.failed(sequenceKey, error);
        return Promise.reject(error);
      });
      if (!Array.isArray(reply) || typeof reply[0] !== 'number' || typeof reply[1] !== 'string')
        throw new Error('the change sequence answered in an unexpected form');
      return { last: reply[0], keeper: reply[1] };
    },
  };
}
