/**
 * What each Redis node evicts when it is full (`maxmemory-policy`), checked whenever a connection
 * becomes ready (docs/cache.md#when-redis-fails). Page entries carry their expiry and may go; the
 * operator state (revocations, blocks, TTL overrides) carries none and must never go, or an
 * operator's decision would lapse by accident. So under an `allkeys-*` policy a Redis that holds
 * the operator state is a misconfiguration, and a cache Redis under `noeviction` with a `maxmemory`
 * refuses every write once full (pages are served, none stored). Managed Redis services that
 * disable `CONFIG` are not checked.
 */
import type { RedisClient } from './connection.js';

/** One node's eviction settings. */
export interface EvictionSetting {
  readonly node: string;
  readonly policy: string;
  /** Bytes; 0 is no limit. */
  readonly maxmemory: number;
}

/** What a Redis holds: the cache's keys, the operator state, or both. */
export interface RedisHolds {
  readonly pages: boolean;
  readonly operatorState: boolean;
}

/** Why `setting` is wrong for what its Redis holds, or `undefined` when it is right. */
export function evictionProblem(setting: EvictionSetting, holds: RedisHolds): string | undefined {
  if (holds.operatorState && setting.policy.startsWith('allkeys-'))
    return `maxmemory-policy ${setting.policy} may evict the operator state (revocations, blocks, TTL overrides): set volatile-lru`;
  if (holds.pages && setting.policy === 'noeviction' && setting.maxmemory > 0)
    return 'maxmemory-policy noeviction refuses every write once maxmemory is reached (no page is stored): set volatile-lru';
  return undefined;
}

/** Each primary node's settings; empty when `CONFIG GET` is refused or fails. */
export async function readEvictionSettings(client: RedisClient): Promise<EvictionSetting[]> {
  const nodes = 'nodes' in client ? client.nodes('master') : [client];
  const settings = await Promise.all(
    nodes.map(async (node): Promise<EvictionSetting | undefined> => {
      try {
        const reply: unknown = await node.call('CONFIG', 'GET', 'maxmemory-policy', 'maxmemory');
        if (!Array.isArray(reply)) return undefined;
        const values = new Map<unknown, unknown>();
        for (let i = 0; i + 1 < reply.length; i += 2) values.set(reply[i], reply[i + 1]);
        const policy = values.get('maxmemory-policy');
        const maxmemory = Number(values.get('maxmemory'));
        if (typeof policy !== 'string' || !Number.isFinite(maxmemory)) return undefined;
        return { node: `${node.options.host ?? ''}:${String(node.options.port ?? '')}`, policy, maxmemory };
      } catch {
        return undefined;
      }
    }),
  );
  return settings.filter((setting): setting is EvictionSetting => setting !== undefined);
}

/** Checks the nodes of `client` each time it becomes ready: `report` hears of each, with its problem if any. */
export function watchEvictionPolicy(
  client: RedisClient,
  holds: RedisHolds,
  report: (setting: EvictionSetting, problem: string | undefined) => void,
): void {
  client.on('ready', () => {
    void readEvictionSettings(client).then((settings) => {
      for (const setting of settings) report(setting, evictionProblem(setting, holds));
    });
  });
}
