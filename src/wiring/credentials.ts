/** Authentication: a verified token, not revoked; and the inbound limits that follow it (docs/credentials.md, docs/limits.md). */
import { type AccessLists, accessListsOver } from '../auth/access-lists.js';
import { type Authenticator, createAuthenticator } from '../auth/authenticate.js';
import { createTokenVerifier, type TokenVerifier } from '../auth/verify-token.js';
import type { OperatorControl } from '../control/operator-control.js';
import { createInboundLimiter, type InboundLimiter } from '../limits/inbound.js';
import { RedisHealth } from '../platform/redis/health.js';
import type { Foundation } from './foundation.js';
import type { SharedParts } from './shared.js';

export interface CredentialParts {
  readonly lists: AccessLists;
  readonly verifier: TokenVerifier;
  readonly authenticator: Authenticator;
  readonly limiter: InboundLimiter;
}

export function wireCredentials(
  foundation: Foundation,
  shared: SharedParts,
  control: OperatorControl,
): CredentialParts {
  const { options, config, now, metrics, closers } = foundation;
  // Unread since the start: refused, unless the operator chose to serve (docs/scaling-out.md#the-operator-state-and-what-survives-what).
  const lists = accessListsOver(
    control.state,
    now,
    config.control.unconfirmed === 'serve' ? () => true : () => control.confirmed,
  );
  const verifier = createTokenVerifier({
    keys: options.keys,
    issuer: options.issuer,
    audience: options.audience,
    clockToleranceSeconds: config.auth.clockTolerance,
    claims: config.auth.claims,
    now,
  });
  closers.add('token verifier', () => verifier.close());
  const { redis } = shared;
  const limiter = createInboundLimiter({
    perCredential: config.rateLimit.perCredential,
    perCompany: config.rateLimit.perCompany,
    replicas: config.rateLimit.replicas,
    liveReplicas: shared.liveReplicas,
    redis:
      redis === undefined
        ? undefined
        : {
            client: redis.client,
            health: new RedisHealth(redis.client, { now, onFailure: () => metrics.redisError('limits') }),
            prefix: config.cache.keyPrefix,
            timeoutMs: config.redis.commandTimeoutMs,
          },
    now,
  });
  return { lists, verifier, authenticator: createAuthenticator(verifier, lists), limiter };
}
