/**
 * Authorisation (seed §5, docs/credentials.md): `view_slab` plus the resource's permission, held by the
 * credential and, when an employee is involved, by the employee too; the token's scope and plan
 * modules when present; company and employee blocks. Pure apart from the block lists.
 */
import type { ResourceDef } from '../catalog/resources.js';
import { ForbiddenError } from '../errors/proxy-error.js';
import type { AccessLists } from './access-lists.js';
import type { Principal } from './principal.js';

export interface AuthorizationPolicy {
  /** A token that has a scope claim must include this one (default `operations:read`). */
  readonly requiredScope: string;
  /** A token that has a modules claim must include this one (default `slab`). */
  readonly requiredModule: string;
}

export const DEFAULT_AUTHORIZATION_POLICY: AuthorizationPolicy = {
  requiredScope: 'operations:read',
  requiredModule: 'slab',
};

/** The permissions of `required` not in `held`; `undefined` (and no array made) when none are. */
function missingFrom(held: ReadonlySet<string>, required: readonly string[]): string[] | undefined {
  for (const permission of required) if (!held.has(permission)) return required.filter((p) => !held.has(p));
  return undefined;
}

/** Returns the 403 this principal deserves for this resource, or `undefined` when allowed. */
export function authorize(
  principal: Principal,
  resource: ResourceDef,
  policy: AuthorizationPolicy,
  lists: AccessLists,
): ForbiddenError | undefined {
  if (lists.isCompanyBlocked(principal.company)) return new ForbiddenError('company');
  const employee = principal.employee;
  if (employee !== undefined && lists.isEmployeeBlocked(principal.company, employee.id))
    return new ForbiddenError('employee');
  if (principal.scope !== undefined && !principal.scope.has(policy.requiredScope)) {
    return new ForbiddenError('scope', [policy.requiredScope]);
  }
  if (principal.modules !== undefined && !principal.modules.has(policy.requiredModule)) {
    return new ForbiddenError('module', [policy.requiredModule]);
  }
  const missing = missingFrom(principal.permissions, resource.requiredPermissions);
  if (missing !== undefined) return new ForbiddenError('permission', missing);
  if (employee !== undefined) {
    const employeeMissing = missingFrom(employee.permissions, resource.requiredPermissions);
    if (employeeMissing !== undefined) return new ForbiddenError('employee', employeeMissing);
  }
  return undefined;
}
