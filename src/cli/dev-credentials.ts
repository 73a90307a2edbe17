/**
 * Development credentials for the embedded default, the sandbox, the token CLI and the tests.
 * The secret is fixed so that `npm run token` mints tokens the running proxy accepts; it is never
 * used once `UPSTREAM_URL` is set (the start then demands a real key source).
 */
import { randomUUID } from 'node:crypto';
import { SignJWT } from 'jose';
import { ALL_PERMISSIONS } from '../catalog/resources.js';

export const DEV_SECRET = 'slab-ops-proxy development secret: never use it in production';
export const DEV_ALGORITHM = 'HS256';

export interface DevTokenOptions {
  readonly company: string | number;
  /** Defaults to every permission of the catalog. */
  readonly permissions?: readonly string[];
  readonly employee?: string | number;
  readonly employeePermissions?: readonly string[];
  readonly scope?: string;
  readonly modules?: readonly string[];
  readonly subject?: string;
  readonly tokenId?: string;
  /** Lifetime in seconds (default one day). */
  readonly ttlSeconds?: number;
  readonly issuer?: string;
  readonly audience?: string;
  readonly secret?: string;
}

export async function mintDevToken(options: DevTokenOptions): Promise<string> {
  const claims: Record<string, unknown> = {
    company_id: options.company,
    permissions: options.permissions ?? ALL_PERMISSIONS,
  };
  if (options.employee !== undefined) {
    claims.employee_id = options.employee;
    claims.employee_permissions = options.employeePermissions ?? [];
  }
  if (options.scope !== undefined) claims.scope = options.scope;
  if (options.modules !== undefined) claims.modules = options.modules;
  let jwt = new SignJWT(claims)
    .setProtectedHeader({ alg: DEV_ALGORITHM, typ: 'JWT' })
    .setIssuedAt()
    .setExpirationTime(`${options.ttlSeconds ?? 86_400}s`)
    .setSubject(
      options.subject ??
        `dev-${String(options.company)}${options.employee === undefined ? '' : `-${String(options.employee)}`}`,
    )
    .setJti(options.tokenId ?? randomUUID());
  if (options.issuer !== undefined) jwt = jwt.setIssuer(options.issuer);
  if (options.audience !== undefined) jwt = jwt.setAudience(options.audience);
  return jwt.sign(new TextEncoder().encode(options.secret ?? DEV_SECRET));
}
