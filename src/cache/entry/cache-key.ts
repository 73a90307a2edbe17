/**
 * Cache keys (docs/cache.md), pure. A key names one canonical read for one tenant partition:
 *
 *   <prefix>:{<company>:<resource>}:<partition>:<kind>:<canonical query or id>
 *
 * Injective by construction: every segment before the last is colon-free (the prefix is checked,
 * company ids are `[A-Za-z0-9_-]` or digits, resources come from the catalog, employee ids follow
 * the company grammar, credential ids are base64url-encoded), and the last segment is the strictly
 * encoded canonical query or a numeric id. So splitting on `:` gives back every part, and no two
 * distinct reads of different companies or partitions can share a key, whatever the filter values.
 *
 * The `{company:resource}` hash tag puts one company's resource in one Redis Cluster slot, so
 * the generation and the entry are read in one MGET and a cluster needs no key change.
 *
 * The purge generation is not in the key but in the entry (see `entry.ts`): a lookup reads the
 * generation and the entry in one round trip, and an older entry is a miss that the next fill
 * overwrites instead of orphaning it.
 */
import type { Principal } from '../../auth/principal.js';
import type { ResourceName } from '../../catalog/resources.js';
import type { CanonicalRead } from '../../request/canonical-read.js';
import type { Partition } from '../read/policy.js';

export const KEY_PREFIX_PATTERN = /^[A-Za-z0-9_.-]{1,32}$/;

/** The unit of purging and the Redis Cluster hash slot: one company's one resource. */
export interface CacheGroup {
  readonly company: string;
  readonly resource: ResourceName;
}

export interface CacheAddress {
  readonly group: CacheGroup;
  /** The group's tag (`groupTag`), made once with the address: its keys' hash tag and the L1's. */
  readonly tag: string;
  /** The entry's key. */
  readonly key: string;
  /** The group's generation key. */
  readonly generationKey: string;
  /** The cluster-wide coalescing lease for this key. */
  readonly leaseKey: string;
  /**
   * The keys of the invalidation marks this page answers to (docs/cache.md#soft-invalidation): a
   * list page the group's list mark; a record page the group's whole-resource mark and its
   * record's own.
   */
  readonly markKeys: readonly string[];
}

/** The marks an invalidation sets (docs/cache.md#soft-invalidation), all in the group's hash slot. */
export interface MarkKeys {
  /** Set by every invalidation of the group: a change can move a record into or out of a list. */
  readonly lists: string;
  /** Set by an invalidation of the whole resource: every record page answers to it. */
  readonly all: string;
  /** Set by an invalidation of one record. */
  record(id: string): string;
}

export function markKeys(prefix: string, group: CacheGroup): MarkKeys {
  const base = `${prefix}:${groupTag(group)}:mark`;
  return { lists: `${base}:lists`, all: `${base}:all`, record: (id) => `${base}:id:${id}` };
}

export function groupTag(group: CacheGroup): string {
  return `{${group.company}:${group.resource}}`;
}

export function generationKey(prefix: string, group: CacheGroup): string {
  return `${prefix}:${groupTag(group)}:gen`;
}

/**
 * The fleet's sequence of purge and invalidation announcements (src/cache/read/change-channel.ts):
 * one key of its own hash slot, never a page's (those begin with the prefix, not a brace).
 */
export function changeSequenceKey(prefix: string): string {
  return `{${prefix}:changes}:seq`;
}

/**
 * The sequence's epoch beside it (the same hash slot): a random id written when it is missing, so
 * that a sequence lost with its keys (a flush, an eviction) is told from one never used.
 */
export function changeEpochKey(prefix: string): string {
  return `{${prefix}:changes}:epoch`;
}

/**
 * The partition segment. `co` (the company shares), `em.<id>` or `em-` (per employee; `em-` for
 * tokens without one), `cr.<base64url>` (per credential). None of them can equal `gen`, `lease` or
 * `mark`.
 */
export function partitionSegment(partition: Partition, principal: Principal): string {
  switch (partition) {
    case 'company':
      return 'co';
    case 'employee':
      return principal.employee === undefined ? 'em-' : `em.${principal.employee.id}`;
    case 'credential':
      return `cr.${Buffer.from(principal.credential, 'utf8').toString('base64url')}`;
  }
}

export function cacheAddress(
  prefix: string,
  read: CanonicalRead,
  principal: Principal,
  partition: Partition,
): CacheAddress {
  const group: CacheGroup = { company: principal.company, resource: read.resource.name };
  const tag = groupTag(group);
  const rest = `${partitionSegment(partition, principal)}:${read.kind === 'list' ? `list:${read.query}` : `id:${read.id ?? ''}`}`;
  const marks = markKeys(prefix, group);
  return {
    group,
    tag,
    key: `${prefix}:${tag}:${rest}`,
    generationKey: `${prefix}:${tag}:gen`,
    leaseKey: `${prefix}:${tag}:lease:${rest}`,
    markKeys: read.kind === 'list' ? [marks.lists] : [marks.all, marks.record(read.id ?? '')],
  };
}

/**
 * The company of an entry's key (`<prefix>:{<company>:<resource>}:…`); `undefined` for a key of
 * another shape. The prefix holds no `{` (KEY_PREFIX_PATTERN) and a company id no `:`.
 */
export function companyOfKey(key: string): string | undefined {
  const open = key.indexOf(':{');
  if (open === -1) return undefined;
  const colon = key.indexOf(':', open + 2);
  return colon === -1 ? undefined : key.slice(open + 2, colon);
}
