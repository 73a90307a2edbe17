/**
 * The upstream client (docs/limits.md#the-upstream-guard): an undici keep-alive pool to `UPSTREAM_URL` that sends only the
 * canonical target and the allowed headers, with connect, header and whole-request deadlines and a
 * body size cap. It returns the upstream's answer as bytes or a typed failure; deciding what the
 * client sees is the caller's job.
 */
import { Pool } from 'undici';
import type { TraceFields } from '../observability/trace-context.js';

export interface UpstreamClientOptions {
  /** The upstream's base URL (the seed's `base_url`); may carry a path prefix. */
  readonly url: string;
  /** Deadline for the whole exchange, connect to last body byte, ms. */
  readonly timeoutMs: number;
  readonly maxBodyBytes: number;
  /** Pooled connections (the upstream guard bounds concurrency above this). */
  readonly connections: number;
}

export interface UpstreamAnswer {
  readonly status: number;
  readonly contentType: string | undefined;
  /** The upstream's `Retry-After`, verbatim (429 and 503). */
  readonly retryAfter: string | undefined;
  /** The upstream's validators, as received (`validators.ts` judges them). */
  readonly etag: string | string[] | undefined;
  readonly lastModified: string | string[] | undefined;
  readonly body: Buffer;
  readonly elapsedMs: number;
}

export type UpstreamFailureKind =
  /** No connection could be made: refused, unreachable, unresolvable (→ 503). */
  | 'refused'
  /** A deadline passed: connect, headers or body (→ 504). */
  | 'timeout'
  /** The exchange broke: reset, truncated, unparsable, over the size cap (→ 502). */
  | 'broken';

export class UpstreamFailure extends Error {
  constructor(
    readonly kind: UpstreamFailureKind,
    readonly reason: string,
    readonly elapsedMs: number,
  ) {
    super(`upstream ${kind}: ${reason}`);
  }
}

export interface UpstreamRequest {
  /** Path and query, already canonical, relative to the base URL. */
  readonly target: string;
  /** The client's credential, re-spelled `Bearer <token>`. */
  readonly token: string;
  readonly requestId: string;
  /**
   * W3C Trace Context for the upstream's spans (docs/operations.md#tracing), only while tracing is on: the
   * request then carries `traceparent` and, when the client sent one, `tracestate` as well.
   */
  readonly trace?: TraceFields | undefined;
  /**
   * A conditional refresh of a stored page (RFC 9111 §4.3.1): `If-None-Match` with its entity
   * tag, `If-Modified-Since` with its date.
   */
  readonly ifNoneMatch?: string | undefined;
  readonly ifModifiedSince?: string | undefined;
}

export interface UpstreamClient {
  /** Where requests go, for the upstream span's `server.address` and `server.port`. */
  readonly server: { readonly address: string; readonly port: number };
  get(request: UpstreamRequest): Promise<UpstreamAnswer>;
  close(): Promise<void>;
}

const REFUSED_CODES = new Set([
  'ECONNREFUSED',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EADDRNOTAVAIL',
]);
/** Codes of a pooled connection that the upstream closed under us before answering. */
const STALE_CONNECTION_CODES = new Set(['UND_ERR_SOCKET', 'ECONNRESET', 'EPIPE']);
const TIMEOUT_CODES = new Set([
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_HEADERS_TIMEOUT',
  'UND_ERR_BODY_TIMEOUT',
  'ETIMEDOUT',
]);

function errorCode(error: unknown): string | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  if ('code' in error && typeof error.code === 'string') return error.code;
  if ('cause' in error) return errorCode(error.cause);
  return undefined;
}

function classify(error: unknown, deadline: AbortSignal, elapsedMs: number): UpstreamFailure {
  if (error instanceof UpstreamFailure) return error;
  if (deadline.aborted) return new UpstreamFailure('timeout', 'deadline', elapsedMs);
  const code = errorCode(error) ?? 'unknown';
  if (REFUSED_CODES.has(code)) return new UpstreamFailure('refused', code, elapsedMs);
  if (TIMEOUT_CODES.has(code)) return new UpstreamFailure('timeout', code, elapsedMs);
  return new UpstreamFailure('broken', code, elapsedMs);
}

function headerValue(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

/** Where requests go: the base URL's origin, its path prefix, and the address spans name. */
interface UpstreamBase {
  readonly origin: string;
  readonly path: string;
  readonly server: UpstreamClient['server'];
}

/** Checks `UPSTREAM_URL` (seed: `base_url`, an http(s) URL that may carry a path prefix). */
function upstreamBase(url: string): UpstreamBase {
  let base: URL;
  try {
    base = new URL(url);
  } catch {
    throw new TypeError('UPSTREAM_URL: not a URL');
  }
  if (base.protocol !== 'http:' && base.protocol !== 'https:') throw new TypeError('UPSTREAM_URL: must be http(s)');
  if (base.search !== '' || base.hash !== '') throw new TypeError('UPSTREAM_URL: must not carry a query or fragment');
  return {
    origin: base.origin,
    path: base.pathname.replace(/\/+$/, ''),
    server: {
      address: base.hostname.replace(/^\[(.*)\]$/, '$1'),
      port: base.port === '' ? (base.protocol === 'https:' ? 443 : 80) : Number(base.port),
    },
  };
}

/** The body's bytes, or a `broken` failure once they pass `maxBytes` (the reading stops there). */
async function readCapped(
  body: AsyncIterable<Buffer> & { destroy(): void },
  maxBytes: number,
  startedAt: number,
): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of body) {
    size += chunk.length;
    if (size > maxBytes) {
      body.destroy();
      throw new UpstreamFailure('broken', 'body over maxBodyBytes', performance.now() - startedAt);
    }
    chunks.push(chunk);
  }
  return chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size);
}

/**
 * The headers sent upstream: the credential, the request id, while tracing Trace Context, and for
 * a conditional refresh its validators.
 */
function headersFor(request: UpstreamRequest): Record<string, string> {
  const headers: Record<string, string> = {
    authorization: `Bearer ${request.token}`,
    accept: 'application/json',
    'x-request-id': request.requestId,
  };
  const trace = request.trace;
  if (trace !== undefined) {
    headers.traceparent = trace.traceparent;
    if (trace.tracestate !== undefined) headers.tracestate = trace.tracestate;
  }
  if (request.ifNoneMatch !== undefined) headers['if-none-match'] = request.ifNoneMatch;
  if (request.ifModifiedSince !== undefined) headers['if-modified-since'] = request.ifModifiedSince;
  return headers;
}

/** The client over its one piece of state, the keep-alive pool (undici's `Pool`). */
class PooledUpstreamClient implements UpstreamClient {
  readonly server: UpstreamClient['server'];
  readonly #pool: Pool;
  readonly #basePath: string;
  readonly #timeoutMs: number;
  readonly #maxBodyBytes: number;

  constructor(base: UpstreamBase, options: UpstreamClientOptions) {
    this.server = base.server;
    this.#basePath = base.path;
    this.#timeoutMs = options.timeoutMs;
    this.#maxBodyBytes = options.maxBodyBytes;
    this.#pool = new Pool(base.origin, {
      connections: options.connections,
      connectTimeout: Math.min(options.timeoutMs, 10_000),
      headersTimeout: options.timeoutMs,
      bodyTimeout: options.timeoutMs,
      keepAliveTimeout: 30_000,
    });
  }

  async get(request: UpstreamRequest): Promise<UpstreamAnswer> {
    const startedAt = performance.now();
    const deadline = AbortSignal.timeout(this.#timeoutMs);
    // A keep-alive connection the upstream closed while idle fails the next request sent on it,
    // before any byte of an answer. A GET is idempotent (RFC 9110 §9.2.2): it is sent once more,
    // on a new connection, within the same deadline.
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#exchange(request, startedAt, deadline);
      } catch (error) {
        const retry =
          attempt === 0 &&
          !deadline.aborted &&
          !(error instanceof UpstreamFailure) &&
          STALE_CONNECTION_CODES.has(errorCode(error) ?? '');
        if (!retry) throw classify(error, deadline, performance.now() - startedAt);
      }
    }
  }

  close(): Promise<void> {
    return this.#pool.close();
  }

  async #exchange(request: UpstreamRequest, startedAt: number, deadline: AbortSignal): Promise<UpstreamAnswer> {
    const response = await this.#pool.request({
      method: 'GET',
      path: this.#basePath + request.target,
      headers: headersFor(request),
      signal: deadline,
    });
    // From here on an answer has begun: a failure while reading it is never retried.
    let body: Buffer;
    try {
      body = await readCapped(response.body, this.#maxBodyBytes, startedAt);
    } catch (error) {
      throw classify(error, deadline, performance.now() - startedAt);
    }
    return {
      status: response.statusCode,
      contentType: headerValue(response.headers['content-type']),
      retryAfter: headerValue(response.headers['retry-after']),
      etag: response.headers.etag,
      lastModified: response.headers['last-modified'],
      body,
      elapsedMs: performance.now() - startedAt,
    };
  }
}

export function createUpstreamClient(options: UpstreamClientOptions): UpstreamClient {
  const base = upstreamBase(options.url);
  if (!(options.timeoutMs > 0)) throw new TypeError('upstream.timeout must be positive');
  if (!(options.maxBodyBytes > 0)) throw new TypeError('upstream.maxBodyBytes must be positive');
  return new PooledUpstreamClient(base, options);
}
