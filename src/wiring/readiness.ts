/**
 * What `/readyz` reports (docs/operations.md): the phase — the lifecycle's, then `unconfirmed`
 * while the operator state has not been read since the start, then (opt-in,
 * `control.maxStaleness`) `stale` while it cannot be confirmed — and each component's state.
 */
import type { AccessLists } from '../auth/access-lists.js';
import type { CacheStore } from '../cache/stores/store.js';
import type { OperatorControl } from '../control/operator-control.js';
import type { Readiness } from '../planes/admin/admin-app.js';
import type { RedisHealth } from '../platform/redis/health.js';
import type { BudgetMode } from '../upstream-guard/budget-mode.js';
import type { CircuitBreaker } from '../upstream-guard/circuit-breaker.js';
import type { ConfigInForce } from './config-in-force.js';
import type { ReplicaLifecycle } from './lifecycle.js';

export interface ReadinessParts {
  readonly lifecycle: ReplicaLifecycle;
  readonly lists: AccessLists;
  readonly control: OperatorControl;
  readonly config: ConfigInForce;
  readonly breaker: CircuitBreaker;
  readonly budget: { mode(): BudgetMode };
  readonly store: CacheStore;
  readonly cacheHealth: RedisHealth | undefined;
  /** The replicas counted through Redis (each one's share while Redis is unusable is 1 / this). */
  readonly replicas: () => number;
}

export function readinessOf(parts: ReadinessParts): Readiness {
  const { lifecycle, lists, control, config } = parts;
  return {
    phase() {
      const phase = lifecycle.phase;
      if (phase !== 'ready') return phase;
      if (!lists.areKnown()) return 'unconfirmed';
      // Opt-in (control.maxStaleness): a replica that cannot confirm its operator state leaves
      // the load balancer to the replicas that can (docs/scaling-out.md#the-operator-state-and-what-survives-what).
      const { ageMs } = control.status();
      const maxStaleness = config.current.control.maxStaleness;
      return maxStaleness > 0 && ageMs !== undefined && ageMs > maxStaleness * 1000 ? 'stale' : phase;
    },
    components() {
      const status = control.status();
      return {
        upstream: parts.breaker.state === 'closed' ? 'ok' : `breaker ${parts.breaker.state}`,
        // Where upstream slots come from (src/upstream-guard/budget-mode.ts).
        upstream_budget: parts.budget.mode(),
        cache: parts.store.kind,
        redis: parts.cacheHealth?.state() ?? 'none',
        replicas: parts.replicas(),
        operator_state: {
          shared: status.shared,
          confirmed: status.confirmed,
          entries: status.entries,
          ...(status.ageMs !== undefined && { age_seconds: Math.floor(status.ageMs / 1000) }),
        },
      };
    },
  };
}
