/**
 * Purges and invalidations reaching every replica (docs/operations.md#the-operator-api): the
 * store's new generation or marks already hold in Redis; this tells the other replicas to stop
 * serving their L1 copies of what changed at once rather than within `cache.l1.ttl`. The read
 * service announces its own and subscribes to them (as Kong's proxy-cache does): nobody else fans
 * them out.
 */
import { isResourceName, type ResourceName } from '../../catalog/resources.js';
import type { RedisClient } from '../../platform/redis/connection.js';

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

export function createRedisPurgeBus(options: {
  readonly client: RedisClient;
  readonly subscriber: RedisClient;
  readonly channel: string;
  readonly onError?: (error: unknown) => void;
}): PurgeBus {
  const { client, subscriber, channel } = options;
  const listeners: PurgeListener[] = [];
  const deliver: PurgeListener = (announcement) => {
    for (const listener of listeners) listener(announcement);
  };
  subscriber.on('message', (from: string, message: string) => {
    if (from !== channel) return;
    const announcement = decodeAnnouncement(message);
    if (announcement !== undefined) deliver(announcement);
  });
  subscriber.subscribe(channel).catch((error: unknown) => options.onError?.(error));
  return {
    async announce(announcement) {
      deliver(announcement); // this replica at once, whatever Redis does
      try {
        await client.publish(channel, encodeAnnouncement(announcement));
        return true;
      } catch (error) {
        options.onError?.(error);
        return false;
      }
    },
    subscribe: (listener) => void listeners.push(listener),
  };
}
