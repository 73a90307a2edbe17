/**
 * One request on the data plane, as the steps of the request flow fill it in (steps.ts): every
 * step reads what the ones before it decided and adds its own verdict. Created once per request.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Authenticated } from '../../auth/authenticate.js';
import type { ReadOutcome } from '../../cache/read/read-outcome.js';
import type { LimitVerdict } from '../../limits/limit-verdict.js';
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

/** A route that names one of the 26 reads. */
export type ReadRoute = Extract<Route, { readonly kind: 'list' | 'record' }>;

/**
 * What each stage of the request flow guarantees, on top of the stages before it (in the flow's
 * order: a step that needs a stage runs after the step that reaches it, steps.ts).
 */
interface StageFields {
  /** The query's pairs (step `query`). */
  readonly 'query parsed': { readonly query: ParsedQuery };
  /** The verified credential (step `authenticate`). */
  readonly authenticated: { readonly identity: Authenticated };
  /** A path that names a read (step `resource`). */
  readonly 'read route': {
    readonly target: { readonly path: string; readonly rawQuery: string };
    readonly route: ReadRoute;
  };
  /** The canonical read (step `validate query`). */
  readonly validated: { readonly read: CanonicalRead };
  /** What the cache or the origin gave (step `read`). */
  readonly read: { readonly outcome: ReadOutcome };
}

export type Stage = keyof StageFields;
const STAGES: readonly Stage[] = ['query parsed', 'authenticated', 'read route', 'validated', 'read'];

/** An exchange that has reached `S` and every stage before it. */
export type ExchangeAt<S extends Stage> = Exchange & StageFieldsUpTo<S>;
type StageFieldsUpTo<S extends Stage> = S extends 'query parsed'
  ? StageFields['query parsed']
  : S extends 'authenticated'
    ? StageFieldsUpTo<'query parsed'> & StageFields['authenticated']
    : S extends 'read route'
      ? StageFieldsUpTo<'authenticated'> & StageFields['read route']
      : S extends 'validated'
        ? StageFieldsUpTo<'read route'> & StageFields['validated']
        : StageFieldsUpTo<'validated'> & StageFields['read'];

function holds(ex: Exchange, stage: Stage): boolean {
  switch (stage) {
    case 'query parsed':
      return ex.query !== undefined;
    case 'authenticated':
      return ex.identity !== undefined;
    case 'read route':
      return ex.target !== undefined && (ex.route?.kind === 'list' || ex.route?.kind === 'record');
    case 'validated':
      return ex.read !== undefined;
    case 'read':
      return ex.outcome !== undefined;
  }
}

/** The one guard of the flow: whether the exchange has reached `stage` (and every stage before it). */
export function reached<S extends Stage>(ex: Exchange, stage: S): ex is ExchangeAt<S> {
  for (const each of STAGES) {
    if (!holds(ex, each)) return false;
    if (each === stage) return true;
  }
  return false;
}
