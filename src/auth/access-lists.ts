/**
 * The seam for revocations and blocks (DESIGN §5, §8). Checked on every request, cache hits
 * included. The operations issue feeds these lists from Redis and pub/sub; until then they are
 * in-process and empty unless a caller fills them.
 */
import type { Principal } from './principal.js';
import { tokenDigest } from './verify-token.js';

export interface AccessLists {
  /** A revoked `jti` or `sub`: 401. */
  isRevoked(principal: Principal): boolean;
  /** A token revoked by its digest (an upstream 401 for a token without `jti`): 401. */
  isTokenRevoked(token: string): boolean;
  /** A blocked company: 403 `company`. */
  isCompanyBlocked(company: string): boolean;
  /** A blocked employee of a company: 403 `employee`. */
  isEmployeeBlocked(company: string, employee: string): boolean;
}

/** Everything the lists hold, as shared between replicas. */
export interface AccessSnapshot {
  /** jti → `exp` (seconds). */
  readonly tokenIds: Readonly<Record<string, number>>;
  /** token digest → `exp` (seconds). */
  readonly digests: Readonly<Record<string, number>>;
  readonly subjects: readonly string[];
  readonly companies: readonly string[];
  /** `company/employee`. */
  readonly employees: readonly string[];
}

export class InMemoryAccessLists implements AccessLists {
  /** jti → `exp` in seconds: a revocation is kept until the token would have expired anyway. */
  #revokedTokenIds = new Map<string, number>();
  #revokedDigests = new Map<string, number>();
  #revokedSubjects = new Set<string>();
  #blockedCompanies = new Set<string>();
  #blockedEmployees = new Set<string>();
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  revokeTokenId(jti: string, expiresAt: number): void {
    this.#revokedTokenIds.set(jti, expiresAt);
  }

  revokeDigest(digest: string, expiresAt: number): void {
    this.#revokedDigests.set(digest, expiresAt);
  }

  /** Replaces everything at once (a replica applying the shared lists). */
  replace(snapshot: AccessSnapshot): void {
    this.#revokedTokenIds = new Map(Object.entries(snapshot.tokenIds));
    this.#revokedDigests = new Map(Object.entries(snapshot.digests));
    this.#revokedSubjects = new Set(snapshot.subjects);
    this.#blockedCompanies = new Set(snapshot.companies);
    this.#blockedEmployees = new Set(snapshot.employees);
  }

  isTokenRevoked(token: string): boolean {
    if (this.#revokedDigests.size === 0) return false; // the hit path hashes nothing in the usual case
    const until = this.#revokedDigests.get(tokenDigest(token));
    return until !== undefined && until * 1000 > this.#now();
  }

  revokeSubject(sub: string): void {
    this.#revokedSubjects.add(sub);
  }

  blockCompany(company: string, blocked = true): void {
    if (blocked) this.#blockedCompanies.add(company);
    else this.#blockedCompanies.delete(company);
  }

  blockEmployee(company: string, employee: string, blocked = true): void {
    const key = employeeKey(company, employee);
    if (blocked) this.#blockedEmployees.add(key);
    else this.#blockedEmployees.delete(key);
  }

  isRevoked(principal: Principal): boolean {
    if (principal.subject !== undefined && this.#revokedSubjects.has(principal.subject)) return true;
    if (principal.tokenId === undefined) return false;
    const until = this.#revokedTokenIds.get(principal.tokenId);
    if (until === undefined) return false;
    if (until * 1000 <= this.#now()) {
      this.#revokedTokenIds.delete(principal.tokenId); // the token has expired: nothing left to refuse
      return false;
    }
    return true;
  }

  isCompanyBlocked(company: string): boolean {
    return this.#blockedCompanies.size > 0 && this.#blockedCompanies.has(company);
  }

  isEmployeeBlocked(company: string, employee: string): boolean {
    return this.#blockedEmployees.size > 0 && this.#blockedEmployees.has(employeeKey(company, employee));
  }
}

/** Company ids cannot contain `/` (DESIGN §5 grammar), so this join is unambiguous. */
function employeeKey(company: string, employee: string): string {
  return `${company}/${employee}`;
}
