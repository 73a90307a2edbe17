/**
 * The inbound limits decided in this process (docs/limits.md#inbound-limits): each policy's fixed
 * windows (LocalWindowLimiter), synchronous, with no Redis call. The limits of a replica without
 * Redis, which holds all the points; and, while Redis is unusable (down, hung, or inside the
 * limiter's breaker pause), every replica's fallback, which holds its share, `points / replicas`,
 * and returns to the shared count by itself.
 */
import {
  type LimitVerdict,
  type PolicyCount,
  type PolicyKeys,
  type PolicyName,
  type RatePolicy,
  verdictOf,
} from './limit-verdict.js';
import { LocalWindowLimiter } from './local-window.js';

export interface LocalLimitsOptions {
  readonly perCredential: RatePolicy;
  readonly perCompany: RatePolicy;
  /**
   * The replicas a shared count is split among, when one exists elsewhere (Redis configured):
   * read when a decision is made here, so the share follows the replicas counted. Without it,
   * this process holds every point.
   */
  readonly sharedAmong: (() => number) | undefined;
  readonly policyHeader: string;
  readonly now?: (() => number) | undefined;
}

export class LocalLimits {
  readonly #policies: Readonly<Record<PolicyName, RatePolicy>>;
  readonly #windows: Readonly<Record<PolicyName, LocalWindowLimiter>>;
  readonly #sharedAmong: (() => number) | undefined;
  readonly #policyHeader: string;

  constructor(options: LocalLimitsOptions) {
    const { perCredential, perCompany } = options;
    const clock = options.now === undefined ? {} : { now: options.now };
    this.#policies = { credential: perCredential, company: perCompany };
    this.#windows = {
      credential: new LocalWindowLimiter(perCredential.duration, clock),
      company: new LocalWindowLimiter(perCompany.duration, clock),
    };
    this.#sharedAmong = options.sharedAmong;
    this.#policyHeader = options.policyHeader;
  }

  decide(keys: PolicyKeys): LimitVerdict {
    const credential: PolicyCount = {
      name: 'credential',
      points: this.#points('credential'),
      ...this.#windows.credential.consume(keys.credential),
    };
    // A credential over its own limit does not spend its company's allowance (and its colleagues').
    if (credential.consumed > credential.points) return verdictOf([credential], this.#policyHeader);
    return verdictOf(
      [
        credential,
        { name: 'company', points: this.#points('company'), ...this.#windows.company.consume(keys.company) },
      ],
      this.#policyHeader,
    );
  }

  /** The points a window holds here: the policy's, or this replica's share of them. */
  #points(name: PolicyName): number {
    const { points } = this.#policies[name];
    const replicas = this.#sharedAmong?.();
    return replicas === undefined ? points : Math.max(1, Math.floor(points / replicas));
  }
}
