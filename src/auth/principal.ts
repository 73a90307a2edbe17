/** The verified identity behind a request, built from validated claims (README, "Credentials and permissions"). */
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
}

export interface EmployeeIdentity {
  readonly id: string;
  readonly permissions: ReadonlySet<string>;
}
