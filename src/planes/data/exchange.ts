/**
 * One request on the data plane, as the steps of the request flow fill it in (steps.ts): every
 * step reads what the ones before it decided and adds its own verdict. Created once per request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Authenticated } from '../../auth/authenticate.js';
import type { ReadOutcome } from '../../cache/read-service.js';
import type { LimitVerdict } from '../../limits/inbound.js';
import type { RequestTrace } from '../../observability/tracing.js';
import type { CanonicalRead } from '../../request/canonical-read.js';
import type { ParsedQuery } from '../../request/memo.js';
import type { Route } from '../../request/route.js';

export interface Exchange {
  readonly req: IncomingMessage;
  readonly res: ServerResponse;
  readonly requestId: string;
  /** `performance.now()` when the request reached the data plane. */
  readonly startedAt: number;
  readonly head: boolean;
  /** The target's path under the API prefix, and its raw query; `undefined`: not a path at all. */
  readonly target: { readonly path: string; readonly rawQuery: string } | undefined;
  /** The route the path names; `undefined` with the target. */
  readonly route: Route | undefined;
  /** What the request log shows as the path: a form that cannot carry a token. */
  readonly loggedPath: string;
  /** The catalog resource, for the log line and the metrics, when the path names one. */
  readonly resource: string | undefined;
  /** The request's span and its children, while tracing is on (docs/operations.md#tracing). */
  readonly trace: RequestTrace | undefined;
  /** The query's pairs, parsed once (memoised by the raw query). */
  query: ParsedQuery | undefined;
  /** The verified credential. */
  identity: Authenticated | undefined;
  /** The inbound limits' verdict: the RateLimit fields of every answer after authentication. */
  limits: LimitVerdict | undefined;
  /** The canonical read, once the query is valid. */
  read: CanonicalRead | undefined;
  /** What the cache (or the origin) gave. */
  outcome: ReadOutcome | undefined;
}
