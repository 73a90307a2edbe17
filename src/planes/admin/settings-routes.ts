/**
 * The settings in force: the effective configuration (`/admin/config`, run-time overrides marked)
 * and the run-time TTL overrides of each resource (`/admin/cache/ttl`), shared with every replica.
 */
import type { IRouter, Request, Response } from 'express';
import type { CachePolicies } from '../../cache/read/policy.js';
import { isResourceName, RESOURCE_NAMES } from '../../catalog/resources.js';
import type { FileConfig } from '../../config/schema.js';
import type { OperatorControl } from '../../control/operator-control.js';
import { ttlOverrideSchema } from '../../control/operator-state.js';
import { NotFoundError } from '../../errors/proxy-error.js';
import { bodyProblem, noStore, notShared, problem } from './operator-io.js';

export interface Settings {
  readonly config: () => FileConfig;
  readonly policies: CachePolicies;
  readonly control: OperatorControl;
}

export function settingsRoutes(router: IRouter, { config, policies, control }: Settings): void {
  router.get('/admin/config', function effectiveConfig(_req: Request, res: Response) {
    const current = config();
    const overrides = control.overrides();
    const resources = Object.fromEntries(
      RESOURCE_NAMES.map((name) => [
        name,
        { ...policies.policyFor(name), ...(overrides[name] !== undefined && { override: overrides[name] }) },
      ]),
    );
    noStore(res).json({
      cache: { ...current.cache, effective: resources },
      rateLimit: current.rateLimit,
      upstream: current.upstream,
      control: current.control,
      auth: current.auth,
    });
  });

  router.get('/admin/cache/ttl', function listTtl(_req: Request, res: Response) {
    noStore(res).json({ overrides: control.overrides() });
  });

  router.put('/admin/cache/ttl/:resource', async function setTtl(req: Request, res: Response) {
    const resource = String(req.params.resource);
    if (!isResourceName(resource)) return problem(req, res, new NotFoundError('No such resource.'));
    const parsed = ttlOverrideSchema.safeParse(req.body);
    if (!parsed.success) return problem(req, res, bodyProblem(parsed.error));
    if (!(await control.setOverride(resource, parsed.data))) return notShared(req, res);
    noStore(res).json({ resource, override: parsed.data, effective: policies.policyFor(resource) });
  });

  router.delete('/admin/cache/ttl/:resource', async function deleteTtl(req: Request, res: Response) {
    const resource = String(req.params.resource);
    if (!isResourceName(resource)) return problem(req, res, new NotFoundError('No such resource.'));
    if (!(await control.deleteOverride(resource))) return notShared(req, res);
    res.status(204).end();
  });
}
