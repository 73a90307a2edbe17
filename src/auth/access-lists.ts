/**
 * The seam for revocations and blocks (docs/credentials.md): what authentication
 * and authorisation ask, on every request, cache hits included. The answers come from the operator
 * state (src/control/), which owns the lists; this side only reads them.
 */
import type { Principal } from './principal.js';

export interface AccessLists {
  /**
   * The lists are known: read since this replica started. Until then no revocation or
   * block made elsewhere is, and a verified token cannot be told apart from a revoked one.
   */
  areKnown(): boolean;
  /** A revoked `jti` or `sub`, or a token revoked by its digest (`tokenRevocation`): 401. */
  isRevoked(principal: Principal): boolean;
  /** A blocked company: 403 `company`. */
  isCompanyBlocked(company: string): boolean;
  /** A blocked employee of a company: 403 `employee`. */
  isEmployeeBlocked(company: string, employee: string): boolean;
}

/** What the lists are read from (the operator state satisfies it); times in ms since the epoch. */
export interface AccessState {
  isRevoked(
    principal: { readonly subject?: string | undefined; readonly tokenId?: string | undefined },
    nowMs: number,
  ): boolean;
  /** Whether any token is revoked by digest: only then is a token hashed. */
  readonly hasDigests: boolean;
  isDigestRevoked(digest: string, nowMs: number): boolean;
  isCompanyBlocked(company: string): boolean;
  isEmployeeBlocked(company: string, employee: string): boolean;
}

export function accessListsOver(
  state: AccessState,
  now: () => number = Date.now,
  known: () => boolean = () => true,
): AccessLists {
  return {
    areKnown: known,
    isRevoked: (principal) => {
      const at = now();
      return state.isRevoked(principal, at) || (state.hasDigests && state.isDigestRevoked(principal.tokenDigest, at));
    },
    isCompanyBlocked: (company) => state.isCompanyBlocked(company),
    isEmployeeBlocked: (company, employee) => state.isEmployeeBlocked(company, employee),
  };
}

/** Nothing revoked, nothing blocked (the sandbox, which has no operator). */
export const NO_ACCESS_LISTS: AccessLists = {
  areKnown: () => true,
  isRevoked: () => false,
  isCompanyBlocked: () => false,
  isEmployeeBlocked: () => false,
};
