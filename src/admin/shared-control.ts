/**
 * Run-time operator state shared by every replica (DESIGN §8): TTL overrides live in Redis, and
 * a change is announced on one pub/sub channel so every replica applies it within moments; a
 * periodic re-read heals a missed message, and a replica that starts later reads the state at
 * start. Purges are announced the same way, so other replicas drop their L1 copies at once.
 * Without Redis (one replica) the state is simply local.
 */
import { z } from 'zod';
import { type ResourceName, isResourceName } from '../catalog/resources.js';
import type { PolicyOverrides } from '../cache/policy.js';
import type { AccessSnapshot } from '../auth/access-lists.js';
import type { RedisClient } from '../cache/redis-connection.js';

export const ttlOverrideSchema = z
  .strictObject({
    ttl: z.number().int().min(0).max(31_536_000).optional(),
    staleWhileRevalidate: z.number().int().min(0).max(31_536_000).optional(),
    staleIfError: z.number().int().min(0).max(31_536_000).optional(),
    notFoundTtl: z.number().int().min(0).max(31_536_000).optional(),
  })
  .refine((value) => Object.keys(value).length > 0, { message: 'at least one of ttl, staleWhileRevalidate, staleIfError, notFoundTtl' });

export type TtlOverride = z.infer<typeof ttlOverrideSchema>;

export interface SharedControlOptions {
  readonly redis?: { readonly client: RedisClient; readonly subscriber: RedisClient; readonly prefix: string } | undefined;
  /** Applies the full set of overrides (replacing the previous set). */
  readonly applyOverrides: (overrides: PolicyOverrides) => void;
  /** Applies the revocations and blocks (replacing the previous ones). */
  readonly applyLists: (snapshot: AccessSnapshot) => void;
  /** Drops this replica's in-process copies of a purged group. */
  readonly forgetLocally: (company: string, resource: ResourceName | undefined) => void;
  /** Period of the healing re-read, ms (default 5 000). */
  readonly resyncMs?: number;
  readonly onError?: (error: unknown) => void;
}

export interface SharedControl {
  overrides(): PolicyOverrides;
  setOverride(resource: ResourceName, override: TtlOverride): Promise<void>;
  deleteOverride(resource: ResourceName): Promise<boolean>;
  /** Tells the other replicas that a group was purged (the store's generation already changed). */
  announcePurge(company: string, resource: ResourceName | undefined): Promise<void>;
  /** Revocations: a `jti` or a token digest until the token's `exp` (seconds), or a `sub`. */
  revokeTokenId(jti: string, expiresAt: number): Promise<void>;
  revokeDigest(digest: string, expiresAt: number): Promise<void>;
  revokeSubject(sub: string): Promise<void>;
  blockCompany(company: string, blocked: boolean): Promise<void>;
  blockEmployee(company: string, employee: string, blocked: boolean): Promise<void>;
  lists(): AccessSnapshot;
  /** Re-reads the shared state now. */
  resync(): Promise<void>;
  close(): void;
}

const PURGE = 'purge ';
const TTL = 'ttl';
const LISTS = 'lists';
const EMPTY_LISTS: AccessSnapshot = { tokenIds: {}, digests: {}, subjects: [], companies: [], employees: [] };

export async function createSharedControl(options: SharedControlOptions): Promise<SharedControl> {
  const redis = options.redis;
  let current: PolicyOverrides = {};
  let lists: AccessSnapshot = EMPTY_LISTS;
  const base = `${redis?.prefix ?? ''}:ctl`;
  const hashKey = `${base}:ttl`;
  const channel = base;
  const keys = { tokenIds: `${base}:rev:jti`, digests: `${base}:rev:tok`, subjects: `${base}:rev:sub`, companies: `${base}:block:co`, employees: `${base}:block:em` };
  const now = (): number => Date.now() / 1000;

  function applyLists(next: AccessSnapshot): void {
    lists = next;
    options.applyLists(next);
  }

  /** A hash of id → exp, without the entries whose token has expired anyway. */
  function live(hash: Record<string, string>): Record<string, number> {
    const out: Record<string, number> = {};
    for (const [id, exp] of Object.entries(hash)) if (Number(exp) > now()) out[id] = Number(exp);
    return out;
  }

  async function resyncLists(): Promise<void> {
    if (redis === undefined) return;
    try {
      const [tokenIds, digests, subjects, companies, employees] = await Promise.all([
        redis.client.hgetall(keys.tokenIds),
        redis.client.hgetall(keys.digests),
        redis.client.smembers(keys.subjects),
        redis.client.smembers(keys.companies),
        redis.client.smembers(keys.employees),
      ]);
      applyLists({ tokenIds: live(tokenIds), digests: live(digests), subjects, companies, employees });
    } catch (error) {
      options.onError?.(error); // the last known lists keep applying
    }
  }

  function apply(next: PolicyOverrides): void {
    current = next;
    options.applyOverrides(next);
  }

  async function resync(): Promise<void> {
    if (redis === undefined) return;
    try {
      const stored = await redis.client.hgetall(hashKey);
      const next: PolicyOverrides = {};
      for (const [resource, text] of Object.entries(stored)) {
        if (!isResourceName(resource)) continue;
        const parsed = ttlOverrideSchema.safeParse(JSON.parse(text) as unknown);
        if (parsed.success) next[resource] = parsed.data;
      }
      apply(next);
    } catch (error) {
      options.onError?.(error); // the last known overrides keep applying
    }
  }

  if (redis !== undefined) {
    redis.subscriber.on('message', (from: string, message: string) => {
      if (from !== channel) return;
      if (message === TTL) void resync();
      else if (message === LISTS) void resyncLists();
      else if (message.startsWith(PURGE)) {
        const [company = '', resource = '*'] = message.slice(PURGE.length).split(' ');
        options.forgetLocally(company, isResourceName(resource) ? resource : undefined);
      }
    });
    redis.subscriber.subscribe(channel).catch((error: unknown) => options.onError?.(error));
    await Promise.all([resync(), resyncLists()]);
  }
  const timer = redis === undefined ? undefined : setInterval(() => void Promise.all([resync(), resyncLists()]), options.resyncMs ?? 5_000);
  timer?.unref();

  async function publish(message: string): Promise<void> {
    if (redis === undefined) return;
    await redis.client.publish(channel, message);
  }

  /** Writes to Redis and tells every replica; applies here at once either way. */
  async function changeLists(write: (client: RedisClient) => Promise<unknown>, local: AccessSnapshot): Promise<void> {
    applyLists(local);
    if (redis === undefined) return;
    await write(redis.client);
    await publish(LISTS);
  }

  const without = (items: readonly string[], item: string): string[] => items.filter((i) => i !== item);

  return {
    lists: () => lists,
    async revokeTokenId(jti, expiresAt) {
      await changeLists((c) => c.hset(keys.tokenIds, jti, String(expiresAt)), { ...lists, tokenIds: { ...lists.tokenIds, [jti]: expiresAt } });
    },
    async revokeDigest(digest, expiresAt) {
      await changeLists((c) => c.hset(keys.digests, digest, String(expiresAt)), { ...lists, digests: { ...lists.digests, [digest]: expiresAt } });
    },
    async revokeSubject(sub) {
      await changeLists((c) => c.sadd(keys.subjects, sub), { ...lists, subjects: [...without(lists.subjects, sub), sub] });
    },
    async blockCompany(company, blocked) {
      const companies = blocked ? [...without(lists.companies, company), company] : without(lists.companies, company);
      await changeLists((c) => (blocked ? c.sadd(keys.companies, company) : c.srem(keys.companies, company)), { ...lists, companies });
    },
    async blockEmployee(company, employee, blocked) {
      const id = `${company}/${employee}`;
      const employees = blocked ? [...without(lists.employees, id), id] : without(lists.employees, id);
      await changeLists((c) => (blocked ? c.sadd(keys.employees, id) : c.srem(keys.employees, id)), { ...lists, employees });
    },
    overrides: () => current,
    async setOverride(resource, override) {
      if (redis !== undefined) {
        await redis.client.hset(hashKey, resource, JSON.stringify(override));
        await publish(TTL);
      }
      apply({ ...current, [resource]: override });
    },
    async deleteOverride(resource) {
      const existed = current[resource] !== undefined;
      if (redis !== undefined) {
        await redis.client.hdel(hashKey, resource);
        await publish(TTL);
      }
      const next = { ...current };
      delete next[resource];
      apply(next);
      return existed;
    },
    async announcePurge(company, resource) {
      await publish(`${PURGE}${company} ${resource ?? '*'}`);
    },
    async resync() {
      await Promise.all([resync(), resyncLists()]);
    },
    close() {
      if (timer !== undefined) clearInterval(timer);
    },
  };
}

