/**
 * One canonical read sent to the upstream, and what its answer means: the cache's origin port
 * (`src/cache/read/origin.ts`), implemented over the undici client.
 */

import type { Origin, OriginAnswer } from '../cache/read/origin.js';
import {
  BadGatewayError,
  type ProxyError,
  UpstreamTimeoutError,
  UpstreamUnavailableError,
} from '../errors/proxy-error.js';
import type { PageParts } from '../request/next-page.js';
import { judgeAnswer } from './answer.js';
import { type UpstreamAnswer, type UpstreamClient, UpstreamFailure } from './client.js';
import { entityTag, httpDate } from './validators.js';

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

/**
 * The origin the cache fetches through: one canonical read, sent to the upstream and judged. With
 * a stored page's validators it is a conditional refresh (RFC 9111 §4.3.1): `If-None-Match` with
 * the upstream's entity tag, `If-Modified-Since` with its `Last-Modified` (both when the page has
 * both: the upstream gives If-None-Match the precedence, RFC 9110 §13.1.3), and a 304 is its own
 * outcome. A 304 to a request sent without them is no answer to it: a bad gateway.
 */
export function createUpstreamOrigin(upstream: UpstreamClient): Origin {
  return async ({ read, token, requestId, trace, clientTrace }, validators) => {
    const ifNoneMatch = entityTag(validators?.etag);
    const ifModifiedSince = httpDate(validators?.lastModified);
    const conditional = ifNoneMatch !== undefined || ifModifiedSince !== undefined;
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
        ifNoneMatch,
        ifModifiedSince,
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
    if (answer.status === 304 && conditional) {
      span?.end({ status: 304, ms: answer.elapsedMs });
      return {
        kind: 'not-modified',
        notModified: {
          etag: entityTag(answer.etag),
          lastModified: httpDate(answer.lastModified),
          elapsedMs: answer.elapsedMs,
        },
      };
    }
    const verdict = judgeAnswer(read.kind, answer);
    // An answer the proxy cannot pass on (malformed, truncated, not an object, a 304 it did not
    // ask for) is a failure too.
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
    return { kind: 'answer', answer: originAnswer(answer, verdict.kind === 'ok' ? verdict.page : undefined) };
  };
}

/** The answer as the cache sees it: its validators judged (kept only when well formed), a list page's parts. */
function originAnswer(answer: UpstreamAnswer, page: PageParts | undefined): OriginAnswer {
  return {
    ...(page !== undefined && { page }),
    status: answer.status,
    contentType: answer.contentType,
    retryAfter: answer.retryAfter,
    etag: entityTag(answer.etag),
    lastModified: httpDate(answer.lastModified),
    body: answer.body,
    elapsedMs: answer.elapsedMs,
  };
}
