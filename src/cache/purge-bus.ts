/**
 * Purges reaching every replica (docs/operations.md#the-operator-api): the store's new generation already makes
 * the purged entries misses in Redis; this tells the other replicas to drop their L1 copies at once
 * rather than within `cache.l1.ttl`. The read service announces its own purges and subscribes to
 * them (as Kong's proxy-cache does): nobody else fans them out.
 */
import { isResourceName, type ResourceName } from '../catalog/resources.js';
import type { RedisClient } from '../platform/redis.js';

export type PurgeListener = (company: string, resource: ResourceName | undefined) => void;

export interface PurgeBus {
  /** Tells every replica (this one included); resolves false when Redis could not take it. */
  announce(company: string, resource: ResourceName | undefined): Promise<boolean>;
  subscribe(listener: PurgeListener): void;
}

/** One process: the announcement is the local call. */
export function createLocalPurgeBus(): PurgeBus {
  const listeners: PurgeListener[] = [];
  return {
    announce(company, resource) {
      for (const listener of listeners) listener(company, resource);
      return Promise.resolve(true);
    },
    subscribe: (listener) => void listeners.push(listener),
  };
}

export function createRedisPurgeBus(options: {
  readonly client: RedisClient;
  readonly subscriber: RedisClient;
  readonly channel: string;
  readonly onError?: (error: unknown) => void;
}): PurgeBus {
  const { client, subscriber, channel } = options;
  const listeners: PurgeListener[] = [];
  const deliver: PurgeListener = (company, resource) => {
    for (const listener of listeners) listener(company, resource);
  };
  subscriber.on('message', (from: string, message: string) => {
    if (from !== channel) return;
    // `<company> <resource|*>`: company ids hold no space (their grammar is [A-Za-z0-9_-]).
    const [company = '', resource = '*'] = message.split(' ');
    if (company !== '') deliver(company, isResourceName(resource) ? resource : undefined);
  });
  subscriber.subscribe(channel).catch((error: unknown) => options.onError?.(error));
  return {
    async announce(company, resource) {
      deliver(company, resource); // this replica at once, whatever Redis does
      try {
        await client.publish(channel, `${company} ${resource ?? '*'}`);
        return true;
      } catch (error) {
        options.onError?.(error);
        return false;
      }
    },
    subscribe: (listener) => void listeners.push(listener),
  };
}
