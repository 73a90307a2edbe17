/**
 * A replica's lifecycle (docs/operations.md#reload-start-and-shutdown): starting until both ports
 * listen, ready, then leaving (readiness fails while the client port still serves) and draining
 * (the listener closed; a request that still arrives on a kept-alive connection is refused). Owns
 * the phase and the count of requests in flight on the client port.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { ShuttingDownError } from '../errors/proxy-error.js';
import { writeProblem } from '../http/problem.js';
import { requestIdOf } from '../http/request-id.js';
import type { Phase } from '../planes/admin/admin-app.js';

/** The phases of the lifecycle itself; readiness adds its own (`unconfirmed`, `stale`). */
export type LifecyclePhase = Extract<Phase, 'starting' | 'ready' | 'draining'>;

export class ReplicaLifecycle {
  #phase: LifecyclePhase = 'starting';
  /** Set by `leave` before the drain's delay: readiness fails while the client port still serves. */
  #leaving = false;
  /** Requests on the client port not yet answered (or abandoned): a response closes exactly once. */
  #inFlight = 0;
  readonly #requestClosed = (): void => {
    this.#inFlight -= 1;
  };

  get inFlight(): number {
    return this.#inFlight;
  }

  /** The phase readiness starts from: `draining` from the first step of a shutdown. */
  get phase(): LifecyclePhase {
    return this.#leaving ? 'draining' : this.#phase;
  }

  markReady(): void {
    this.#phase = 'ready';
  }

  leave(): void {
    this.#leaving = true;
  }

  drain(): void {
    this.#phase = 'draining';
  }

  /**
   * Counts a request on the client port until its response closes; `false` when the replica is
   * draining and the request was refused (503, its connection closed after the answer).
   */
  admit(req: IncomingMessage, res: ServerResponse): boolean {
    this.#inFlight += 1;
    res.on('close', this.#requestClosed);
    if (this.#phase !== 'draining') return true;
    // Closes the connection after this answer, so the client's next request opens one elsewhere.
    res.shouldKeepAlive = false;
    writeProblem(res, new ShuttingDownError(), requestIdOf(req), { head: req.method === 'HEAD' });
    return false;
  }
}
