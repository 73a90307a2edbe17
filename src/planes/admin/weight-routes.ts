/**
 * Company weights in the upstream budget's line (`/admin/upstream/weights`,
 * docs/limits.md#fair-shares): a company's slots per turn while companies wait, set at run time for
 * every replica over the config's `upstream.companyWeights`, and back to the config's when deleted.
 */
import type { IRouter, Request, Response } from 'express';
import type { FileConfig } from '../../config/schema.js';
import type { OperatorControl } from '../../control/operator-control.js';
import { companyWeightSchema } from '../../control/operator-state.js';
import { InvalidParameterError } from '../../errors/proxy-error.js';
import type { UpstreamBudget } from '../../upstream-guard/upstream-budget.js';
import { bodyProblem, companyOf, noStore, notShared, problem } from './operator-io.js';

export interface Weights {
  readonly config: () => FileConfig;
  readonly control: OperatorControl;
  readonly budget: Pick<UpstreamBudget, 'weights'>;
}

export function weightRoutes(router: IRouter, { config, control, budget }: Weights): void {
  router.get('/admin/upstream/weights', function listWeights(_req: Request, res: Response) {
    noStore(res).json({
      config: config().upstream.companyWeights,
      runtime: control.weights(),
      effective: budget.weights(),
    });
  });

  router.put('/admin/upstream/weights/:company', async function setWeight(req: Request, res: Response) {
    const company = companyOf(String(req.params.company));
    if (company === undefined) return problem(req, res, new InvalidParameterError('company', 'A company id.'));
    const parsed = companyWeightSchema.safeParse(req.body);
    if (!parsed.success) return problem(req, res, bodyProblem(parsed.error));
    if (!(await control.setWeight(company, parsed.data.weight))) return notShared(req, res);
    noStore(res).json({ company_id: company, weight: parsed.data.weight });
  });

  router.delete('/admin/upstream/weights/:company', async function deleteWeight(req: Request, res: Response) {
    const company = companyOf(String(req.params.company));
    if (company === undefined) return problem(req, res, new InvalidParameterError('company', 'A company id.'));
    if (!(await control.setWeight(company, undefined))) return notShared(req, res);
    res.status(204).end();
  });
}
