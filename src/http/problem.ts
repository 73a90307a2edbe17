/**
 * RFC 9457 problem details for every error the proxy produces, on both planes. The body holds the
 * registry's title, the error's client-facing detail and the request id: never a library message,
 * a key or a token (DESIGN §4).
 */
import type { ServerResponse } from 'node:http';
import { ProxyError } from '../errors/proxy-error.js';
import { problemType } from '../errors/registry.js';
import { ERROR_REGISTRY } from '../errors/registry.js';

export function problemBody(error: ProxyError, requestId: string): Buffer {
  return Buffer.from(
    JSON.stringify({
      type: problemType(error.code),
      title: ERROR_REGISTRY[error.code].title,
      status: error.status,
      code: error.code,
      detail: error.detail,
      request_id: requestId,
      ...error.extras(),
    }),
  );
}

export function writeProblem(
  res: ServerResponse,
  error: ProxyError,
  requestId: string,
  options: { readonly head?: boolean; readonly headers?: Readonly<Record<string, string>> } = {},
): void {
  const body = problemBody(error, requestId);
  const headers: Record<string, string | number> = {
    'content-type': 'application/problem+json',
    'content-length': body.length,
    'cache-control': 'no-store',
    'x-request-id': requestId,
    ...options.headers,
    ...error.headers,
  };
  res.writeHead(error.status, headers);
  res.end(options.head === true ? undefined : body);
}

export function isProxyError(value: unknown): value is ProxyError {
  return value instanceof ProxyError;
}
