/**
 * One canonical read sent to the upstream, and what its answer means: the cache's origin port
 * (`src/cache/origin.ts`), implemented over the undici client.
 */
import {
  BadGatewayError,
  type ProxyError,
  UpstreamTimeoutError,
  UpstreamUnavailableError,
} from '../errors/proxy-error.js';
import type { Origin } from '../cache/origin.js';
import { judgeAnswer } from './answer.js';
import { type UpstreamAnswer, type UpstreamClient, UpstreamFailure } from './client.js';

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

/** The origin the cache fetches through: one canonical read, sent to the upstream and judged. */
export function createUpstreamOrigin(upstream: UpstreamClient): Origin {
  return async ({ read, token, requestId, trace, clientTrace }) => {
    // The CLIENT span covers the exchange alone (the guard's wait for a slot comes before it), and
    // its W3C traceparent goes upstream, so the upstream's spans are its children; with no span,
    // the client's own fields go upstream as it sent them.
    const span = trace?.upstream(read.resource.name, upstream.server);
    let answer: UpstreamAnswer;
    try {
      answer = await upstream.get({
        target: read.upstreamTarget,
        token,
        requestId,
        trace: span === undefined ? clientTrace : span.headers,
      });
    } catch (error) {
      if (!(error instanceof UpstreamFailure)) {
        span?.end({ error: 'defect', ms: 0 });
        throw error;
      }
      span?.end({ error: error.kind, ms: error.elapsedMs });
      const proxyError = errorForFailure(error);
      return { kind: 'failure', error: proxyError, fwdStatus: proxyError.status, upstreamMs: error.elapsedMs };
    }
    const verdict = judgeAnswer(read.kind, answer);
    // An answer the proxy cannot pass on (malformed, truncated, not an object) is a failure too.
    span?.end({
      status: answer.status,
      ...(verdict.kind === 'bad_gateway' && answer.status < 400 && { error: 'invalid_answer' }),
      ms: answer.elapsedMs,
    });
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
