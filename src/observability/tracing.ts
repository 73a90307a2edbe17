/**
 * The proxy's spans (docs/operations.md#tracing), over the OpenTelemetry API: one SERVER span per data-plane
 * request, a child for the store lookup, one for a coalesced wait, and a CLIENT span for the
 * upstream exchange, whose W3C `traceparent` (and the client's `tracestate`) go upstream so that the
 * system of record's spans join the trace.
 *
 * Every name and attribute is decided here, so the call sites (the data plane, the read service,
 * the upstream fetch) hold a `RequestTrace` or `undefined` and nothing else: with tracing off they
 * pay an `undefined` check, and this module (and the OpenTelemetry packages) is not even loaded —
 * the call sites import its types only, and src/observability/tracing-sdk.ts loads it on demand.
 *
 * What a span never holds: a token, a company or subject id, a query, a record id, a page's bytes.
 * Attributes are the route template, the resource name, statuses, the cache result, the request id
 * (the client's only when it holds no token, src/http/request-id.ts) and the upstream's address.
 */
import {
  type Attributes,
  type Context,
  createTraceState,
  type Link,
  ROOT_CONTEXT,
  type Span,
  type SpanContext,
  SpanKind,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import {
  ATTR_ERROR_TYPE,
  ATTR_HTTP_REQUEST_METHOD,
  ATTR_HTTP_REQUEST_METHOD_ORIGINAL,
  ATTR_HTTP_RESPONSE_STATUS_CODE,
  ATTR_HTTP_ROUTE,
  ATTR_SERVER_ADDRESS,
  ATTR_SERVER_PORT,
  ATTR_URL_SCHEME,
} from '@opentelemetry/semantic-conventions';
import { formatTraceparent, parseTraceparent, parseTracestate, type TraceFields } from './trace-context.js';

/** The proxy's own attributes, under one prefix (OpenTelemetry's advice for non-standard names). */
export const ATTR = {
  resource: 'slab_proxy.resource',
  requestId: 'slab_proxy.request_id',
  cacheResult: 'slab_proxy.cache.result',
  errorCode: 'slab_proxy.error_code',
  lookupResult: 'slab_proxy.cache.lookup',
  coalesceScope: 'slab_proxy.coalesce.scope',
  coalesceShared: 'slab_proxy.coalesce.shared',
  upstreamMs: 'slab_proxy.upstream_ms',
} as const;

export const SPAN_NAMES = {
  lookup: 'cache lookup',
  coalescedWait: 'coalesced wait',
} as const;

/** What a request's span starts with: known before any step runs. */
export interface RequestSpanStart {
  /** `req.method` as Node parsed it. */
  readonly method: string;
  /** The route template (`/api/slab/v1/operations/receipts/{id}`) when the target names a read. */
  readonly route: string | undefined;
  readonly resource: string | undefined;
  readonly requestId: string;
  /** The client's `traceparent` and `tracestate` header values, as Node gives them. */
  readonly traceparent: string | string[] | undefined;
  readonly tracestate: string | string[] | undefined;
}

export type StoreLookupResult = 'hit' | 'stale' | 'miss' | 'unavailable';
/** `process`: another request of this process leads the fill; `replicas`: another replica holds its lease. */
export type CoalesceScope = 'process' | 'replicas';

export interface LookupSpan {
  end(result: StoreLookupResult): void;
}

export interface WaitSpan {
  /** `shared`: the wait ended with the other's answer (else this request goes on to fetch). */
  end(shared: boolean): void;
}

export interface UpstreamSpan {
  /** The W3C fields that make the upstream's spans children of this process's CLIENT span. */
  readonly headers: TraceFields;
  /** The upstream answered (`status`), or did not (`error`: refused, timeout, broken), after `ms`. */
  end(outcome: { readonly status?: number; readonly error?: string; readonly ms: number }): void;
}

export interface RequestTrace {
  /** The request's SERVER span, for a link from a request that waits on this one's fill. */
  readonly spanContext: SpanContext;
  /** The store lookup (an L1 hit has none: it is answered before anything is looked up). */
  lookup(): LookupSpan;
  /** A wait on another request's fill; with `leader` (this process), a link to its request span. */
  coalescedWait(scope: CoalesceScope, leader: RequestTrace | undefined): WaitSpan;
  /** The upstream exchange (CLIENT). */
  upstream(resource: string, server: { readonly address: string; readonly port: number }): UpstreamSpan;
  /** Ends the request's span with its answer; later calls do nothing. */
  end(status: number, errorCode: string | undefined, cacheResult: string | undefined): void;
}

export interface Tracing {
  startRequest(start: RequestSpanStart): RequestTrace;
}

/**
 * HTTP semantic conventions: `http.request.method` is one of the known methods, else `_OTHER` with
 * the original beside it; Node's parser already refuses anything that is not a method token.
 */
const KNOWN_METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'DELETE', 'CONNECT', 'OPTIONS', 'TRACE', 'PATCH']);

/** The remote parent a client's `traceparent` names (§3.2), with its `tracestate`; else a new trace. */
function parentContext(start: RequestSpanStart): Context {
  const parent = parseTraceparent(start.traceparent);
  if (parent === undefined) return ROOT_CONTEXT;
  const state = parseTracestate(start.tracestate);
  return trace.setSpanContext(ROOT_CONTEXT, {
    traceId: parent.traceId,
    spanId: parent.parentId,
    traceFlags: parent.flags,
    isRemote: true,
    ...(state !== undefined && { traceState: createTraceState(state) }),
  });
}

class Traced implements RequestTrace {
  #ended = false;
  #context: Context | undefined;

  constructor(
    private readonly tracer: Tracer,
    private readonly span: Span,
  ) {}

  get spanContext(): SpanContext {
    return this.span.spanContext();
  }

  /** This request's span as the parent of its children (made on the first child only). */
  private get context(): Context {
    this.#context ??= trace.setSpan(ROOT_CONTEXT, this.span);
    return this.#context;
  }

  private child(name: string, kind: SpanKind, attributes: Attributes, links?: Link[]): Span {
    return this.tracer.startSpan(name, { kind, attributes, ...(links !== undefined && { links }) }, this.context);
  }

  lookup(): LookupSpan {
    const span = this.child(SPAN_NAMES.lookup, SpanKind.INTERNAL, {});
    return {
      end(result) {
        span.setAttribute(ATTR.lookupResult, result);
        span.end();
      },
    };
  }

  coalescedWait(scope: CoalesceScope, leader: RequestTrace | undefined): WaitSpan {
    const span = this.child(
      SPAN_NAMES.coalescedWait,
      SpanKind.INTERNAL,
      { [ATTR.coalesceScope]: scope },
      leader === undefined ? undefined : [{ context: leader.spanContext }],
    );
    return {
      end(shared) {
        span.setAttribute(ATTR.coalesceShared, shared);
        span.end();
      },
    };
  }

  upstream(resource: string, server: { readonly address: string; readonly port: number }): UpstreamSpan {
    // HTTP client span name: the method (semantic conventions; the upstream's path holds the query).
    const span = this.child('GET', SpanKind.CLIENT, {
      [ATTR_HTTP_REQUEST_METHOD]: 'GET',
      [ATTR_SERVER_ADDRESS]: server.address,
      [ATTR_SERVER_PORT]: server.port,
      [ATTR.resource]: resource,
    });
    const context = span.spanContext();
    return {
      headers: {
        traceparent: formatTraceparent(context.traceId, context.spanId, (context.traceFlags & 1) === 1),
        // The client's tracestate, as the SDK carries it from the parent (W3C §3.3: passed on).
        tracestate: context.traceState?.serialize() || undefined,
      },
      end(outcome) {
        if (span.isRecording()) {
          span.setAttribute(ATTR.upstreamMs, Math.round(outcome.ms * 1000) / 1000);
          if (outcome.status !== undefined) span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, outcome.status);
          // A CLIENT span is an error from 400 up; a failure without an answer names its kind.
          const error =
            outcome.error ??
            (outcome.status !== undefined && outcome.status >= 400 ? String(outcome.status) : undefined);
          if (error !== undefined) {
            span.setAttribute(ATTR_ERROR_TYPE, error);
            span.setStatus({ code: SpanStatusCode.ERROR });
          }
        }
        span.end();
      },
    };
  }

  end(status: number, errorCode: string | undefined, cacheResult: string | undefined): void {
    if (this.#ended) return;
    this.#ended = true;
    const span = this.span;
    if (span.isRecording()) {
      span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, status);
      if (cacheResult !== undefined) span.setAttribute(ATTR.cacheResult, cacheResult);
      if (errorCode !== undefined) span.setAttribute(ATTR.errorCode, errorCode);
      // A SERVER span is an error only for 5xx: a 4xx is the client's, and answered as designed.
      if (status >= 500) {
        span.setAttribute(ATTR_ERROR_TYPE, String(status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
    }
    span.end();
  }
}

/** The proxy's tracing over one OpenTelemetry tracer (the SDK's, or a test's). */
export function createTracing(tracer: Tracer): Tracing {
  return {
    startRequest(start) {
      const known = KNOWN_METHODS.has(start.method);
      const method = known ? start.method : '_OTHER';
      const attributes: Attributes = {
        [ATTR_HTTP_REQUEST_METHOD]: method,
        [ATTR_URL_SCHEME]: 'http',
        [ATTR.requestId]: start.requestId,
      };
      if (!known) attributes[ATTR_HTTP_REQUEST_METHOD_ORIGINAL] = start.method;
      if (start.route !== undefined) attributes[ATTR_HTTP_ROUTE] = start.route;
      if (start.resource !== undefined) attributes[ATTR.resource] = start.resource;
      // HTTP server span name: `{method} {http.route}`, or the method alone when no route matched.
      const name = start.route === undefined ? method : `${method} ${start.route}`;
      const span = tracer.startSpan(name, { kind: SpanKind.SERVER, attributes }, parentContext(start));
      return new Traced(tracer, span);
    },
  };
}
