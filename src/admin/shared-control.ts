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

/**
 * Every change applies on this replica at once, whatever Redis does, and resolves `true` once it
 * is stored and announced for the others (or there are no others: no Redis), `false` when Redis
 * failed: the operator must then hear that the other replicas did not get it. Never rejects.
 */
export interface SharedControl {
  overrides(): PolicyOverrides;
  setOverride(resource: ResourceName, override: TtlOverride): Promise<boolean>;
  deleteOverride(resource: ResourceName): Promise<boolean>;
  /** Tells the other replicas that a group was purged (the store's generation already changed). */
  announcePurge(company: string, resource: ResourceName | undefined): Promise<boolean>;
  /** Revocations: a `jti` or a token digest until the token's `exp` (seconds), or a `sub`. */
  revokeTokenId(jti: string, expiresAt: number): Promise<boolean>;
  revokeDigest(digest: string, expiresAt: number): Promise<boolean>;
  revokeSubject(sub: string): Promise<boolean>;
  blockCompany(company: string, blocked: boolean): Promise<boolean>;
  blockEmployee(company: string, employee: string, blocked: boolean): Promise<boolean>;
  lists(): AccessSnapshot;
  /** Re-reads the shared state now (and first at start, before the replica serves). */
  resync(): Promise<void>;
  close(): void;
}

const PURGE = 'purge ';
const TTL = 'ttl';
const LISTS = 'lists';
const EMPTY_LISTS: AccessSnapshot = { tokenIds: {}, digests: {}, subjects: [], companies: [], employees: [] };

export function createSharedControl(options: SharedControlOptions): SharedControl {
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

  async function pruneLapsed(key: string, hash: Record<string, string>): Promise<void> {
    const lapsed = Object.keys(hash).filter((id) => !(Number(hash[id]) > now()));
    if (redis !== undefined && lapsed.length > 0) await redis.client.hdel(key, ...lapsed);
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
      // A revocation outlives its token only until the token's `exp`: the lapsed ones are dropped
      // here, so the hashes do not grow for ever (every replica may do it; HDEL is idempotent).
      await Promise.all([pruneLapsed(keys.tokenIds, tokenIds), pruneLapsed(keys.digests, digests)]);
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
  }
  // The first read is the caller's `resync()`, once Redis is connected (the start waits for it).
  const timer = redis === undefined ? undefined : setInterval(() => void Promise.all([resync(), resyncLists()]), options.resyncMs ?? 5_000);
  timer?.unref();

  /** Stores a change and announces it; `false` (logged) when Redis failed. */
  async function share(write: ((client: RedisClient) => Promise<unknown>) | undefined, message: string): Promise<boolean> {
    if (redis === undefined) return true;
    try {
      if (write !== undefined) await write(redis.client);
      await redis.client.publish(channel, message);
      return true;
    } catch (error) {
      options.onError?.(error);
      return false;
    }
  }

  /** Applies here at once, then writes to Redis and tells every replica. */
  function changeLists(write: (client: RedisClient) => Promise<unknown>, local: AccessSnapshot): Promise<boolean> {
    applyLists(local);
    return share(write, LISTS);
  }

  const without = (items: readonly string[], item: string): string[] => items.filter((i) => i !== item);

  return {
    lists: () => lists,
    revokeTokenId(jti, expiresAt) {
      return changeLists((c) => c.hset(keys.tokenIds, jti, String(expiresAt)), { ...lists, tokenIds: { ...lists.tokenIds, [jti]: expiresAt } });
    },
    revokeDigest(digest, expiresAt) {
      return changeLists((c) => c.hset(keys.digests, digest, String(expiresAt)), { ...lists, digests: { ...lists.digests, [digest]: expiresAt } });
    },
    revokeSubject(sub) {
      return changeLists((c) => c.sadd(keys.subjects, sub), { ...lists, subjects: [...without(lists.subjects, sub), sub] });
    },
    blockCompany(company, blocked) {
      const companies = blocked ? [...without(lists.companies, company), company] : without(lists.companies, company);
      return changeLists((c) => (blocked ? c.sadd(keys.companies, company) : c.srem(keys.companies, company)), { ...lists, companies });
    },
    blockEmployee(company, employee, blocked) {
      const id = `${company}/${employee}`;
      const employees = blocked ? [...without(lists.employees, id), id] : without(lists.employees, id);
      return changeLists((c) => (blocked ? c.sadd(keys.employees, id) : c.srem(keys.employees, id)), { ...lists, employees });
    },
    overrides: () => current,
    setOverride(resource, override) {
      apply({ ...current, [resource]: override });
      return share((c) => c.hset(hashKey, resource, JSON.stringify(override)), TTL);
    },
    deleteOverride(resource) {
      const next = { ...current };
      delete next[resource];
      apply(next);
      return share((c) => c.hdel(hashKey, resource), TTL);
    },
    announcePurge(company, resource) {
      return share(undefined, `${PURGE}${company} ${resource ?? '*'}`);
    },
    async resync() {
      await Promise.all([resync(), resyncLists()]);
    },
    close() {
      if (timer !== undefined) clearInterval(timer);
    },
  };
}

