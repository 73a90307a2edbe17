/**
 * The sandbox's own access decision, written from the specification (seed §5 and §7), not from the
 * proxy's authorisation code. A credential may read a resource when:
 *
 * 1. its token scope, if it has one, includes `operations:read`, and its plan modules, if it names
 *    them, include `slab` (seed §7: "the token scope … or plan/module access"; the names are the
 *    contract's defaults, docs/credentials.md);
 * 2. it holds `view_slab` plus the resource's own permission (seed §5.3 and its table, in
 *    `resources.ts`);
 * 3. where an employee is involved, the employee's current permissions hold both as well (seed §5.3:
 *    "Both must be held by the operational credential and, where an employee is involved, by the
 *    current employee permissions").
 *
 * Anything else is a 403 naming the reason and what was missing. Company scoping (seed §5.2) is not a
 * refusal: it limits every answer to the credential's company (`api.ts`).
 */
import type { Credential } from './credentials.js';
import type { SeedResource } from './resources.js';

export const REQUIRED_SCOPE = 'operations:read';
export const REQUIRED_MODULE = 'slab';

export interface Denial {
  readonly reason: 'scope' | 'module' | 'permission' | 'employee';
  /** What the credential (or the employee) lacks, in the order the resource needs them. */
  readonly missing: readonly string[];
}

function lacking(held: ReadonlySet<string>, needed: readonly string[]): string[] {
  return needed.filter((permission) => !held.has(permission));
}

/** The 403 this credential gets for this resource, or `undefined` when it may read it. */
export function denial(credential: Credential, resource: SeedResource): Denial | undefined {
  if (credential.scope !== undefined && !credential.scope.has(REQUIRED_SCOPE))
    return { reason: 'scope', missing: [REQUIRED_SCOPE] };
  if (credential.modules !== undefined && !credential.modules.has(REQUIRED_MODULE))
    return { reason: 'module', missing: [REQUIRED_MODULE] };
  const missing = lacking(credential.permissions, resource.permissions);
  if (missing.length > 0) return { reason: 'permission', missing };
  if (credential.employee !== undefined) {
    const employeeMissing = lacking(credential.employee.permissions, resource.permissions);
    if (employeeMissing.length > 0) return { reason: 'employee', missing: employeeMissing };
  }
  return undefined;
}
