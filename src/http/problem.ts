/**
 * RFC 9457 problem details for every error the proxy produces, on both planes. The body holds the
 * registry's title, the error's client-facing detail and the request id: never a library message,
 * a key or a token (docs/clients.md#errors).
 */
import type { ServerResponse } from 'node:http';
import type { ProxyError } from '../errors/proxy-error.js';
import { ERROR_REGISTRY, problemType } from '../errors/registry.js';

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

/**
 * The code of the problem each response answered with, for the Express planes' request log
 * (pino-http sees only the finished response, not the error). Weak: it goes with the response.
 */
const answeredCodes = new WeakMap<ServerResponse, string>();

/** The problem `code` this response was answered with, if it was a problem. */
export function problemCodeOf(res: ServerResponse): string | undefined {
  return answeredCodes.get(res);
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
  answeredCodes.set(res, error.code);
  res.writeHead(error.status, headers);
  res.end(options.head === true ? undefined : body);
}
