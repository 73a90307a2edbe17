/** The verified identity behind a request, built from validated claims (docs/credentials.md). */
export interface Principal {
  /** The tenant, in its canonical text form: every cache key and limit is scoped by it. */
  readonly company: string;
  /** Per-credential identity for limits and partitions: `sub`, else `jti`, else a token hash. */
  readonly credential: string;
  readonly subject: string | undefined;
  readonly tokenId: string | undefined;
  readonly permissions: ReadonlySet<string>;
  readonly employee: EmployeeIdentity | undefined;
  /** `undefined` when the token carries no scope claim (then no scope rule applies). */
  readonly scope: ReadonlySet<string> | undefined;
  /** `undefined` when the token carries no modules claim (then no module rule applies). */
  readonly modules: ReadonlySet<string> | undefined;
  /** `exp`, seconds since the epoch. */
  readonly expiresAt: number;
  /**
   * The SHA-256 digest of the token (`tokenDigest`), computed once when it is verified: the key of
   * the verified-token cache and of a revocation by digest. Never the token.
   */
  readonly tokenDigest: string;
}

/**
 * How one token is revoked when the system of record refuses it (an upstream 401 for a token the
 * proxy accepted, docs/credentials.md): by its `jti` when it has one — every copy
 * of the token, whatever its spelling — else by its digest.
 */
export function tokenRevocation(principal: Principal): { readonly kind: 'jti' | 'digest'; readonly value: string } {
  return principal.tokenId === undefined
    ? { kind: 'digest', value: principal.tokenDigest }
    : { kind: 'jti', value: principal.tokenId };
}

export interface EmployeeIdentity {
  readonly id: string;
  readonly permissions: ReadonlySet<string>;
}
