/**
 * The verdict of the inbound limits (docs/limits.md#inbound-limits), from the counts of a request
 * under each policy, and the IETF RateLimit fields every decision carries
 * (draft-ietf-httpapi-ratelimit-headers-11): `RateLimit-Policy` lists both policies; `RateLimit`
 * gives the tighter one's remaining quota.
 */
import type { RateLimitPolicy } from '../errors/proxy-error.js';
import { secondsToWait } from '../http/retry-after.js';

/** The inbound limits' policies: the ones a replica decides for the client port (not the upstream's 429). */
export type PolicyName = Exclude<RateLimitPolicy, 'upstream' | 'invalidation'>;

export interface RatePolicy {
  readonly points: number;
  readonly duration: number;
}

/** The keys a request is counted under, one per policy. */
export type PolicyKeys = Readonly<Record<PolicyName, string>>;

/** A request's count under one policy. */
export interface PolicyCount {
  readonly name: PolicyName;
  readonly points: number;
  readonly consumed: number;
  readonly msBeforeNext: number;
}

export interface LimitVerdict {
  readonly allowed: boolean;
  /** `RateLimit-Policy` and `RateLimit` header values. */
  readonly policyHeader: string;
  readonly rateLimitHeader: string;
  /** Refusals: the policy that refused, and whole seconds until it allows again (never early). */
  readonly refusedBy: PolicyName | undefined;
  readonly retryAfterSeconds: number;
}

/** Structured-field string: quotes and backslashes escaped (RFC 9651 §3.3.3). */
function sfString(text: string): string {
  return `"${text.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

/** The policies' names as structured-field strings, made once (the `RateLimit` field of every answer names one). */
const POLICY_NAMES: Readonly<Record<PolicyName, string>> = {
  credential: sfString('credential'),
  company: sfString('company'),
};

export function formatPolicyHeader(perCredential: RatePolicy, perCompany: RatePolicy): string {
  return `${POLICY_NAMES.credential};q=${perCredential.points};w=${perCredential.duration}, ${POLICY_NAMES.company};q=${perCompany.points};w=${perCompany.duration}`;
}

/**
 * The verdict of the counts taken: refused by any policy over its points; headers for the tighter
 * one. A request the credential policy refuses is not counted against its company (only one count).
 */
export function verdictOf(counts: readonly [PolicyCount, ...PolicyCount[]], policyHeader: string): LimitVerdict {
  const remaining = (c: PolicyCount): number => Math.max(0, c.points - c.consumed);
  // One pass, no arrays (this runs on every hit): the tighter policy is the one with fewer
  // requests left, then the longer wait; a refusal waits for the last exceeded window to reset.
  let tighter = counts[0];
  let refusing: PolicyCount | undefined;
  for (const c of counts) {
    const left = remaining(c) - remaining(tighter);
    if (left < 0 || (left === 0 && c.msBeforeNext > tighter.msBeforeNext)) tighter = c;
    if (c.consumed > c.points && (refusing === undefined || c.msBeforeNext > refusing.msBeforeNext)) refusing = c;
  }
  const shown = refusing ?? tighter;
  return {
    allowed: refusing === undefined,
    policyHeader,
    rateLimitHeader: `${POLICY_NAMES[shown.name]};r=${remaining(shown)};t=${secondsToWait(shown.msBeforeNext)}`,
    refusedBy: refusing?.name,
    retryAfterSeconds: refusing === undefined ? 0 : secondsToWait(refusing.msBeforeNext),
  };
}
