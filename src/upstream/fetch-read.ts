/**
 * One canonical read sent to the upstream, and what its answer means (DESIGN §4): an answer to
 * pass on (a well-formed 200, or a 4xx as the upstream sent it), or a failure the proxy turns into
 * 502/503/504 unless a stale copy may be served instead.
 */
import {
  BadGatewayError,
  type ProxyError,
  UpstreamTimeoutError,
  UpstreamUnavailableError,
} from '../errors/proxy-error.js';
import type { Principal } from '../auth/principal.js';
import type { CanonicalRead } from '../request/canonical-read.js';
import { judgeAnswer } from './answer.js';
import { type UpstreamAnswer, type UpstreamClient, UpstreamFailure } from './client.js';

export type FetchOutcome =
  | { readonly kind: 'answer'; readonly answer: UpstreamAnswer }
  | {
      readonly kind: 'failure';
      readonly error: ProxyError;
      /** For `Cache-Status: fwd-status`: the upstream's 5xx, else the status the proxy answers. */
      readonly fwdStatus: number;
      /** The status the upstream answered with, when it answered at all. */
      readonly upstreamStatus?: number;
      readonly upstreamMs: number;
    };

export interface FetchRequest {
  readonly read: CanonicalRead;
  readonly principal: Principal;
  /** The bearer token, forwarded; never keyed, never stored, never logged. */
  readonly token: string;
  readonly requestId: string;
}

export type ReadFetcher = (request: FetchRequest) => Promise<FetchOutcome>;

export function errorForFailure(failure: UpstreamFailure): ProxyError {
  switch (failure.kind) {
    case 'refused':
      return new UpstreamUnavailableError();
    case 'timeout':
      return new UpstreamTimeoutError();
    case 'broken':
      return new BadGatewayError();
  }
}

export function createReadFetcher(upstream: UpstreamClient): ReadFetcher {
  return async ({ read, token, requestId }) => {
    let answer: UpstreamAnswer;
    try {
      answer = await upstream.get({ target: read.upstreamTarget, token, requestId });
    } catch (error) {
      if (!(error instanceof UpstreamFailure)) throw error;
      const proxyError = errorForFailure(error);
      return { kind: 'failure', error: proxyError, fwdStatus: proxyError.status, upstreamMs: error.elapsedMs };
    }
    const verdict = judgeAnswer(read.kind, answer);
    if (verdict.kind === 'bad_gateway') {
      return {
        kind: 'failure',
        error: new BadGatewayError(),
        fwdStatus: answer.status >= 500 ? answer.status : 502,
        upstreamStatus: answer.status,
        upstreamMs: answer.elapsedMs,
      };
    }
    return { kind: 'answer', answer };
  };
}
