/**
 * Blocks (`/admin/blocks`): a company, or one employee of a company, refused on every replica
 * until unblocked; listed a page at a time.
 */
import type { IRouter, Request, Response } from 'express';
import type { OperatorControl } from '../../control/operator-control.js';
import { InvalidParameterError } from '../../errors/proxy-error.js';
import { companyOf, noStore, notShared, page, problem } from './operator-io.js';

export function blockRoutes(router: IRouter, control: OperatorControl): void {
  router.get('/admin/blocks', function listBlocks(req: Request, res: Response) {
    const listed = page(control.blocks(), (b) => `${b.kind}/${b.company_id}/${b.employee_id ?? ''}`, req.query);
    if (!('items' in listed)) return problem(req, res, listed);
    noStore(res).json(listed);
  });

  const block = (blocked: boolean) =>
    async function setCompanyBlock(req: Request, res: Response): Promise<void> {
      const company = companyOf(String(req.params.company));
      if (company === undefined) return problem(req, res, new InvalidParameterError('company', 'A company id.'));
      if (!(await control.blockCompany(company, blocked))) return notShared(req, res);
      noStore(res).status(blocked ? 200 : 204);
      if (blocked) res.json({ company_id: company, blocked });
      else res.end();
    };
  router.put('/admin/blocks/companies/:company', block(true));
  router.delete('/admin/blocks/companies/:company', block(false));

  const blockEmployee = (blocked: boolean) =>
    async function setEmployeeBlock(req: Request, res: Response): Promise<void> {
      const company = companyOf(String(req.params.company));
      const employee = companyOf(String(req.params.employee)); // the same grammar
      if (company === undefined) return problem(req, res, new InvalidParameterError('company', 'A company id.'));
      if (employee === undefined) return problem(req, res, new InvalidParameterError('employee', 'An employee id.'));
      if (!(await control.blockEmployee(company, employee, blocked))) return notShared(req, res);
      noStore(res).status(blocked ? 200 : 204);
      if (blocked) res.json({ company_id: company, employee_id: employee, blocked });
      else res.end();
    };
  router.put('/admin/blocks/employees/:company/:employee', blockEmployee(true));
  router.delete('/admin/blocks/employees/:company/:employee', blockEmployee(false));
}
