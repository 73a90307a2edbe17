/**
 * The entries a fill stores: a new one for a cacheable answer, or the stored one revalidated
 * (RFC 9111 §4.3.4), each with the times of the policy in force and the page's own lifetime.
 */
import { brotliBody, type CacheEntry, strongEtag } from '../entry/entry.js';
import { headsOf } from '../entry/marks.js';
import type { PageWindow } from '../entry/page-window.js';
import type { OriginAnswer, Validators } from './origin.js';
import { filledTimes } from './page-lifetime.js';
import type { EffectivePolicy } from './policy.js';

/**
 * The marks an entry keeps (marks.ts): the heads of those read before the upstream was asked, so
 * that a change announced since leaves it stale; none when there were none.
 */
function keptMarks(read: string | undefined): string | undefined {
  const heads = read === undefined ? '' : headsOf(read);
  return heads === '' ? undefined : heads;
}

/** What a new entry is stored under: the group's generation, the marks read and the page's own lifetime. */
export interface StoredUnder {
  readonly generation: string;
  /** The page's marks as the store gave them, before the upstream was asked. */
  readonly mark: string | undefined;
  readonly lifetimeMs: number | undefined;
  /** A list page's keyset window, when it keeps the keyset rule (page-window.ts). */
  readonly window?: PageWindow | undefined;
}

/**
 * The entry for a cacheable answer (a well-formed 200, or the 404 of a single record); a
 * prefetch's is flagged as fetched ahead until a request takes it (docs/cache.md#prefetch).
 */
export function entryFor(
  answer: OriginAnswer,
  policy: EffectivePolicy,
  under: StoredUnder,
  storedAt: number,
  ahead: boolean,
): CacheEntry {
  const etag = strongEtag(answer.body);
  const mark = keptMarks(under.mark);
  return {
    status: answer.status,
    contentType: answer.contentType ?? 'application/json',
    etag,
    body: answer.body,
    // Compressed once, here: the store keeps it, and `br` clients are sent it, this one included.
    brotli: brotliBody(answer.body, etag),
    // Its times (page-lifetime.ts): one fetched ahead is kept a while past its freshness even
    // without stale windows, for the replica that fetched it to read whether a request took it.
    ...filledTimes(answer.status, policy, storedAt, under.lifetimeMs, ahead),
    generation: under.generation,
    upstreamEtag: answer.etag,
    lastModified: answer.lastModified,
    ...(ahead && { ahead: true }),
    ...(mark !== undefined && { mark }),
    ...(under.window !== undefined && { window: under.window }),
  };
}

/**
 * The stored entry revalidated at `at` (RFC 9111 §4.3.4): its response and body, the times of the
 * policy in force now, the validators the origin gave this time, and the page's marks read before
 * it was asked.
 */
export function revalidated(
  current: CacheEntry,
  policy: EffectivePolicy,
  at: number,
  validators: Validators,
  mark: string | undefined,
  lifetimeMs: number | undefined,
): CacheEntry {
  return {
    ...current,
    mark: keptMarks(mark),
    // A refresh is a request's (or a hit's): whatever was fetched ahead has been taken.
    ahead: undefined,
    ...filledTimes(current.status, policy, at, lifetimeMs, false),
    upstreamEtag: validators.etag,
    lastModified: validators.lastModified,
  };
}

/** Whether a 200 or 404 carries the very response stored: status, type and every body byte. */
export function isSameAnswer(current: CacheEntry, answer: OriginAnswer): boolean {
  return (
    current.status === answer.status &&
    current.contentType === (answer.contentType ?? 'application/json') &&
    current.body.equals(answer.body)
  );
}
