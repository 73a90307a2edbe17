/**
 * Purges (`/admin/cache/purge`): a company's cached reads, of one resource or all, on every
 * replica.
 */
import type { IRouter, Request, Response } from 'express';
import { z } from 'zod';
import { isTenantText } from '../../auth/claims.js';
import type { ReadService } from '../../cache/read/read-service.js';
import { isResourceName } from '../../catalog/resources.js';
import { NotFoundError } from '../../errors/proxy-error.js';
import { bodyProblem, noStore, notShared, problem } from './operator-io.js';

const companyId = z.union([
  z.number().int().positive().max(Number.MAX_SAFE_INTEGER).transform(String),
  z.string().refine(isTenantText),
]);
const purgeBody = z.strictObject({ company_id: companyId, resource: z.string().optional() });

export function purgeRoutes(router: IRouter, reads: Pick<ReadService, 'purge'>): void {
  router.post('/admin/cache/purge', async function purge(req: Request, res: Response) {
    const parsed = purgeBody.safeParse(req.body);
    if (!parsed.success) return problem(req, res, bodyProblem(parsed.error));
    const { company_id: company, resource } = parsed.data;
    if (resource !== undefined && !isResourceName(resource))
      return problem(req, res, new NotFoundError('No such resource.'));
    // Without the store's new generation, or the announcement, the other replicas keep serving.
    if (!(await reads.purge(company, resource))) return notShared(req, res);
    noStore(res).json({ company_id: company, resource: resource ?? null, purged: true });
  });
}
