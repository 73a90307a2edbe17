/**
 * Liveness and readiness (docs/operations.md#the-operator-api): `/healthz` says the process
 * answers, `/readyz` whether the load balancer should send it traffic.
 */
import type { IRouter, Request, Response } from 'express';

export type Phase = 'starting' | 'ready' | 'unconfirmed' | 'stale' | 'draining';

export interface Readiness {
  /** Ready only between the end of the start and the beginning of a drain (and, when the config asks, while the operator state is current). */
  phase(): Phase;
  /** Component states for the body, e.g. `{ upstream: 'ok' }`. */
  components(): Record<string, unknown>;
}

export function healthRoutes(router: IRouter, readiness: Readiness): void {
  router.get('/healthz', function healthz(_req: Request, res: Response) {
    res.set('cache-control', 'no-store').json({ status: 'ok' });
  });
  router.get('/readyz', function readyz(_req: Request, res: Response) {
    // A degraded component (Redis down, the breaker open) is still 200: the replica serves.
    const phase = readiness.phase();
    res
      .status(phase === 'ready' ? 200 : 503)
      .set('cache-control', 'no-store')
      .json({ status: phase, ...readiness.components() });
  });
}
