/**
 * Claim validation. jose checks signatures and time claims but not claim types (`company_id: "1"`,
 * `permissions: "all"` both pass it, docs/architecture.md#jose): every claim the proxy relies on is checked here, and
 * anything unexpected is a 401, never a guess.
 */
import type { JWTPayload } from 'jose';
import type { Principal } from './principal.js';

export interface ClaimNames {
  readonly company: string;
  readonly permissions: string;
  readonly employee: string;
  readonly employeePermissions: string;
  readonly scope: string;
  readonly modules: string;
}

export const DEFAULT_CLAIM_NAMES: ClaimNames = {
  company: 'company_id',
  permissions: 'permissions',
  employee: 'employee_id',
  employeePermissions: 'employee_permissions',
  scope: 'scope',
  modules: 'modules',
};

/** docs/credentials.md: a positive integer, or 1–64 characters of `[A-Za-z0-9_-]`. */
const TENANT_TEXT = /^[A-Za-z0-9_-]{1,64}$/;

/** A company or employee id as text (the other spelling is a positive integer). */
export function isTenantText(value: string): boolean {
  return TENANT_TEXT.test(value);
}
const MAX_LIST_ITEMS = 256;
const MAX_ITEM_LENGTH = 128;
const MAX_IDENTIFIER_LENGTH = 256;

export class ClaimError extends Error {
  constructor(readonly claim: string) {
    super(`invalid claim ${claim}`);
  }
}

/**
 * A tenant or employee identifier in canonical text. The number 7 and the string "7" name the same
 * tenant (issuers differ in how they type ids); any other spelling ("07", "7.0") is its own string.
 */
function identifier(value: unknown, claim: string): string {
  if (typeof value === 'number') {
    if (Number.isSafeInteger(value) && value > 0) return String(value);
    throw new ClaimError(claim);
  }
  if (typeof value === 'string' && TENANT_TEXT.test(value)) return value;
  throw new ClaimError(claim);
}

function stringList(value: unknown, claim: string): ReadonlySet<string> {
  if (!Array.isArray(value) || value.length > MAX_LIST_ITEMS) throw new ClaimError(claim);
  const items = new Set<string>();
  for (const item of value) {
    if (typeof item !== 'string' || item.length === 0 || item.length > MAX_ITEM_LENGTH) throw new ClaimError(claim);
    items.add(item);
  }
  return items;
}

/** `scope` (RFC 8693 §4.2) is space-separated text; some issuers send an array. Both are read. */
function tokenList(value: unknown, claim: string): ReadonlySet<string> | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') {
    if (value.length > MAX_LIST_ITEMS * MAX_ITEM_LENGTH) throw new ClaimError(claim);
    return new Set(value.split(' ').filter((s) => s !== ''));
  }
  return stringList(value, claim);
}

function optionalText(value: unknown, claim: string): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string' && value.length > 0 && value.length <= MAX_IDENTIFIER_LENGTH) return value;
  throw new ClaimError(claim);
}

/**
 * @param tokenDigest the token's digest: the credential identity of last resort (never the token).
 */
export function principalFromClaims(payload: JWTPayload, names: ClaimNames, tokenDigest: string): Principal {
  const claims = payload as Record<string, unknown>;
  const company = identifier(claims[names.company], names.company);
  const permissions = stringList(claims[names.permissions], names.permissions);
  const employeeClaim = claims[names.employee];
  let employee: Principal['employee'];
  if (employeeClaim !== undefined) {
    employee = {
      id: identifier(employeeClaim, names.employee),
      permissions: stringList(claims[names.employeePermissions], names.employeePermissions),
    };
  }
  const subject = optionalText(payload.sub, 'sub');
  const tokenId = optionalText(payload.jti, 'jti');
  if (typeof payload.exp !== 'number') throw new ClaimError('exp');
  return {
    company,
    credential:
      subject !== undefined ? `sub:${subject}` : tokenId !== undefined ? `jti:${tokenId}` : `tok:${tokenDigest}`,
    subject,
    tokenId,
    permissions,
    employee,
    scope: tokenList(claims[names.scope], names.scope),
    modules: tokenList(claims[names.modules], names.modules),
    expiresAt: payload.exp,
    tokenDigest,
  };
}
