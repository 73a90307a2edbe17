/**
 * The sandbox's own reading of the operational credential, written from the specification (seed §5
 * and §7) and the contract's claim names (docs/credentials.md), never from the
 * proxy's auth code:
 *
 * - seed §5.1: the credential is a bearer token in the `Authorization` header; the scheme is
 *   case-insensitive (RFC 9110 §11.1) and the token is a `token68` (RFC 6750 §2.1). No header, another
 *   scheme, a malformed value, or two `Authorization` headers (which one would count?) carry no
 *   credential.
 * - seed §7: a credential that is missing, invalid or expired is a 401. The token is a JWT; jose
 *   checks its signature, `exp` (required: credentials expire) and `nbf`, with the contract's 30 s
 *   leeway for clock skew (RFC 7519 §4.1.4), and the issuer and audience when the sandbox is given them.
 *   Algorithms are pinned to the key's family: HMAC for a secret, asymmetric for a public key or a JWKS.
 * - seed §5.2: the token belongs to a company (`company_id`: a positive integer, or 1–64 characters of
 *   `[A-Za-z0-9_-]`; the number 7 and the text "7" are one company).
 * - seed §5.3: the permissions held by the credential (`permissions`, a list of strings) and, where an
 *   employee is involved (`employee_id`), the employee's current permissions (`employee_permissions`,
 *   then required).
 * - seed §7 (403): the token scope (`scope`, space-separated words or a list) and plan/module access
 *   (`modules`, a list, or words like `scope`), each checked only when the token has it.
 *
 * A claim of the wrong type makes the credential invalid (401), never a guess.
 */
import { createPublicKey, createSecretKey, type JsonWebKey, type KeyObject } from 'node:crypto';
import { createRemoteJWKSet, type JWTPayload, type JWTVerifyGetKey, jwtVerify } from 'jose';

/** Where the keys that sign credentials come from (the same choices the proxy's operator has). */
export type SandboxKeys =
  | { readonly kind: 'secret'; readonly secret: string; readonly algorithms?: readonly string[] }
  /** `key`: a PEM public key or certificate, or a JWK in JSON. */
  | { readonly kind: 'public-key'; readonly key: string; readonly algorithms?: readonly string[] }
  | {
      readonly kind: 'jwks';
      readonly url: string;
      readonly algorithms?: readonly string[];
      readonly cooldownMs?: number;
      readonly timeoutMs?: number;
    };

/** The claim names (docs/credentials.md; an operator may rename them). */
export interface SandboxClaimNames {
  readonly company: string;
  readonly permissions: string;
  readonly employee: string;
  readonly employeePermissions: string;
  readonly scope: string;
  readonly modules: string;
}

export const SANDBOX_CLAIM_NAMES: SandboxClaimNames = {
  company: 'company_id',
  permissions: 'permissions',
  employee: 'employee_id',
  employeePermissions: 'employee_permissions',
  scope: 'scope',
  modules: 'modules',
};

/** What a valid credential says. */
export interface Credential {
  /** The company, as text: every answer is limited to its records. */
  readonly company: string;
  readonly permissions: ReadonlySet<string>;
  /** Present when an employee is involved. */
  readonly employee: { readonly id: string; readonly permissions: ReadonlySet<string> } | undefined;
  /** Absent: the token has no scope, and no scope rule applies. */
  readonly scope: ReadonlySet<string> | undefined;
  /** Absent: the token says nothing of plan modules, and no module rule applies. */
  readonly modules: ReadonlySet<string> | undefined;
}

const HMAC = ['HS256', 'HS384', 'HS512'];
const ASYMMETRIC = [
  'RS256',
  'RS384',
  'RS512',
  'PS256',
  'PS384',
  'PS512',
  'ES256',
  'ES384',
  'ES512',
  'EdDSA',
  'Ed25519',
];
/** Seconds of leeway on `exp` and `nbf` for clock skew between the issuer and this server. */
const CLOCK_LEEWAY_SECONDS = 30;

/** RFC 9110 §11.1 credentials: an auth-scheme, one or more spaces, a token68. */
const AUTHORIZATION = /^([!#$%&'*+.^_`|~0-9A-Za-z-]+) +([A-Za-z0-9\-._~+/]+=*)$/;

/**
 * The bearer token of a request (every `Authorization` header it carried), or `undefined` when it
 * carries none that can be read.
 */
export function bearerToken(headers: readonly string[] | undefined): string | undefined {
  if (headers?.length !== 1) return undefined;
  const match = AUTHORIZATION.exec(headers[0] ?? '');
  if (match === null || match[1]?.toLowerCase() !== 'bearer') return undefined;
  return match[2];
}

class InvalidCredential extends Error {}

/** A company or employee: a positive integer, or 1–64 characters of `[A-Za-z0-9_-]`; as text. */
function identity(value: unknown): string {
  if (typeof value === 'number' && Number.isSafeInteger(value) && value > 0) return String(value);
  if (typeof value === 'string' && /^[A-Za-z0-9_-]{1,64}$/.test(value)) return value;
  throw new InvalidCredential();
}

function strings(value: unknown): ReadonlySet<string> {
  if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) throw new InvalidCredential();
  return new Set(value as string[]);
}

/** Space-separated words (RFC 8693 §4.2) or a list of strings; `undefined` when absent. */
function words(value: unknown): ReadonlySet<string> | undefined {
  if (value === undefined) return undefined;
  if (typeof value === 'string') return new Set(value.split(' ').filter((word) => word !== ''));
  return strings(value);
}

function credentialOf(payload: JWTPayload, names: SandboxClaimNames): Credential {
  const claims = payload as Record<string, unknown>;
  const employee = claims[names.employee];
  return {
    company: identity(claims[names.company]),
    permissions: strings(claims[names.permissions]),
    employee:
      employee === undefined
        ? undefined
        : { id: identity(employee), permissions: strings(claims[names.employeePermissions]) },
    scope: words(claims[names.scope]),
    modules: words(claims[names.modules]),
  };
}

function keyOf(keys: SandboxKeys): { key: KeyObject | JWTVerifyGetKey; algorithms: readonly string[] } {
  switch (keys.kind) {
    case 'secret':
      return { key: createSecretKey(Buffer.from(keys.secret)), algorithms: keys.algorithms ?? HMAC };
    case 'public-key': {
      const text = keys.key.trim();
      if (!text.startsWith('{')) return { key: createPublicKey(text), algorithms: keys.algorithms ?? ASYMMETRIC };
      const jwk = JSON.parse(text) as JsonWebKey & { alg?: unknown };
      // A JWK that names its algorithm is used with that one alone.
      const own = typeof jwk.alg === 'string' ? [jwk.alg] : ASYMMETRIC;
      return { key: createPublicKey({ key: jwk, format: 'jwk' }), algorithms: keys.algorithms ?? own };
    }
    case 'jwks':
      return {
        key: createRemoteJWKSet(new URL(keys.url), {
          ...(keys.cooldownMs !== undefined && { cooldownDuration: keys.cooldownMs }),
          ...(keys.timeoutMs !== undefined && { timeoutDuration: keys.timeoutMs }),
        }),
        algorithms: keys.algorithms ?? ASYMMETRIC,
      };
  }
}

export interface CredentialOptions {
  readonly keys: SandboxKeys;
  readonly issuer?: string | undefined;
  readonly audience?: string | undefined;
  readonly claims?: SandboxClaimNames | undefined;
}

/** Checks tokens: the credential they carry, or `undefined` for a missing, invalid or expired one (401). */
export function credentialChecker(options: CredentialOptions): (token: string) => Promise<Credential | undefined> {
  const { key, algorithms } = keyOf(options.keys);
  const names = options.claims ?? SANDBOX_CLAIM_NAMES;
  const verifyOptions = {
    algorithms: [...algorithms],
    requiredClaims: ['exp'],
    clockTolerance: CLOCK_LEEWAY_SECONDS,
    ...(options.issuer !== undefined && { issuer: options.issuer }),
    ...(options.audience !== undefined && { audience: options.audience }),
  };
  return async (token) => {
    try {
      const { payload } =
        typeof key === 'function'
          ? await jwtVerify(token, key, verifyOptions)
          : await jwtVerify(token, key, verifyOptions);
      return credentialOf(payload, names);
    } catch {
      // A bad signature, an expired token, an unknown key, a claim of the wrong type: all invalid.
      return undefined;
    }
  };
}
