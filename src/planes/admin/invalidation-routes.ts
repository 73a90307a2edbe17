/**
 * Soft invalidation (`/admin/cache/invalidate`, docs/cache.md#soft-invalidation): "these records
 * (or this resource) of this company changed", one change or a batch, from an operator or a system
 * of record's change feed. The pages that may show them turn stale on every replica: each is
 * served while one conditional refresh runs. Nothing is deleted: a purge does that.
 *
 * A feed may send a change more than once, late, or out of order: marking is idempotent and
 * order-free (docs/cache.md#soft-invalidation), so at-least-once delivery is all it needs. What
 * it may not do is flood: this replica takes the changes its bucket holds (`cache.invalidation`,
 * docs/operations.md#the-change-feed), and answers the rest 429 with the seconds until it would.
 */
import type { IRouter, Request, Response } from 'express';
import { z } from 'zod';
import { isTenantText } from '../../auth/claims.js';
import type { ReadService } from '../../cache/read/read-service.js';
import { isPositiveId } from '../../catalog/grammar.js';
import { isResourceName, type ResourceName } from '../../catalog/resources.js';
import { InvalidBodyError, type ProxyError, RateLimitedError } from '../../errors/proxy-error.js';
import { secondsToWait } from '../../http/retry-after.js';
import type { Metrics } from '../../observability/metrics.js';
import type { TokenBucket } from '../../platform/token-bucket.js';
import { bodyProblem, noStore, notShared, problem } from './operator-io.js';

/** Changes in one batch, and record ids in one change, at most (the body is 16 KiB at most anyway). */
const MAX_CHANGES = 500;
const MAX_IDS = 1_000;

const companyId = z.union([
  z.number().int().positive().max(Number.MAX_SAFE_INTEGER).transform(String),
  z.string().refine(isTenantText),
]);
/** A record id as the API writes it in a path: a positive integer, as a number or its decimal text. */
const recordId = z.union([
  z.number().int().positive().max(Number.MAX_SAFE_INTEGER).transform(String),
  z.string().refine(isPositiveId),
]);
const change = z.strictObject({
  company_id: companyId,
  resource: z.string().refine(isResourceName).optional(),
  ids: z.array(recordId).min(1).max(MAX_IDS).optional(),
});
const batch = z.strictObject({ changes: z.array(change).min(1).max(MAX_CHANGES) });

/** One change, or a batch: told apart by `changes`, so that a bad body's pointer names its member. */
function parseBody(input: unknown): { readonly changes: readonly Change[] } | { readonly error: z.ZodError } {
  const parsed =
    typeof input === 'object' && input !== null && 'changes' in input
      ? batch.safeParse(input)
      : change.transform((one) => ({ changes: [one] })).safeParse(input);
  return parsed.success ? { changes: parsed.data.changes } : { error: parsed.error };
}

type Change = z.infer<typeof change>;

/** A company's changes to one resource (or all), their record ids merged; `ids` undefined: all of them. */
interface ChangedGroup {
  readonly company: string;
  readonly resource: ResourceName | undefined;
  ids: Set<string> | undefined;
}

/** The changes by company and resource: one invalidation per group. */
function grouped(changes: readonly Change[]): Map<string, ChangedGroup> {
  const groups = new Map<string, ChangedGroup>();
  for (const { company_id: company, resource, ids } of changes) {
    const name = resource !== undefined && isResourceName(resource) ? resource : undefined;
    const key = `${company} ${name ?? '*'}`;
    const group = groups.get(key) ?? { company, resource: name, ids: new Set<string>() };
    // A change without ids is the whole resource's: it takes in every record change of its group.
    if (ids === undefined) group.ids = undefined;
    else for (const id of ids) group.ids?.add(id);
    groups.set(key, group);
  }
  return groups;
}

/** The change feed's limit: its bucket, and where refused changes are counted. */
export interface InvalidationLimit {
  readonly bucket: Pick<TokenBucket, 'burst' | 'take'>;
  readonly metrics: Pick<Metrics, 'invalidationsRefused' | 'rateLimited'>;
}

/**
 * The problem for `count` changes the bucket does not take now; undefined when it took them. A
 * batch larger than the bucket could never be taken whole, however long its sender waited: a 400
 * naming `#/changes`, not a 429 (whose `Retry-After` would be a promise never kept), nor a 413
 * (RFC 9110 §15.5.14 is about the content's size, and the body is within its 16 KiB).
 */
function refusal(count: number, { bucket, metrics }: InvalidationLimit): ProxyError | undefined {
  if (count > bucket.burst) {
    metrics.invalidationsRefused('batch', count);
    return new InvalidBodyError(
      '#/changes',
      `${String(count)} changes in one batch; this proxy takes at most ${String(bucket.burst)} at once (cache.invalidation.burst): send smaller batches.`,
    );
  }
  const taken = bucket.take(count);
  if (taken.taken) return undefined;
  metrics.invalidationsRefused('flood', count);
  metrics.rateLimited('invalidation');
  // Whole seconds, rounded up and at least 1 (RFC 9110 §10.2.3): a sender that waits them finds the changes held.
  return new RateLimitedError(secondsToWait(taken.waitMs), 'invalidation');
}

export function invalidationRoutes(
  router: IRouter,
  reads: Pick<ReadService, 'invalidate'>,
  limit: InvalidationLimit,
): void {
  router.post('/admin/cache/invalidate', async function invalidate(req: Request, res: Response) {
    const parsed = parseBody(req.body);
    if ('error' in parsed) return problem(req, res, bodyProblem(parsed.error));
    const { changes } = parsed;
    const groups = [...grouped(changes).values()];
    if (groups.some((group) => group.resource === undefined && group.ids !== undefined))
      return problem(req, res, new InvalidBodyError('#/ids', 'Record ids need their resource.'));
    const refused = refusal(changes.length, limit);
    if (refused !== undefined) return problem(req, res, refused);
    const done = await Promise.all(
      groups.map((group) => reads.invalidate(group.company, group.resource, group.ids && [...group.ids])),
    );
    // Without the marks in the store, or the announcement, the other replicas keep serving.
    if (!done.every(Boolean)) return notShared(req, res);
    noStore(res).json({ invalidated: groups.length, changes: changes.length });
  });
}
