/**
 * The opt-in pass-through (`upstream.passthrough: true`, docs/configuration.md#pass-through): every request that is not one
 * of the 26 cacheable reads goes to the upstream untouched, for clients that use the proxy as their
 * only base URL. http-proxy-middleware is good at exactly this; it is kept off the data plane
 * because it can neither coalesce nor cap a body it reads (docs/architecture.md#http-proxy-middleware).
 */

import type { IncomingMessage, ServerResponse } from 'node:http';
import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Socket } from 'node:net';
import { createProxyMiddleware, proxyEventsPlugin, type RequestHandler } from 'http-proxy-middleware';
import {
  BadGatewayError,
  type ProxyError,
  UpstreamTimeoutError,
  UpstreamUnavailableError,
} from '../errors/proxy-error.js';
import { writeProblem } from '../http/problem.js';
import { requestIdOf } from '../http/request-id.js';

export interface PassthroughOptions {
  readonly url: string;
  readonly timeoutMs: number;
  readonly maxSockets: number;
}

export interface Passthrough {
  readonly handler: RequestHandler;
  close(): void;
}

function errorFor(error: Error & { code?: string }): ProxyError {
  if (error.code === 'ECONNREFUSED' || error.code === 'ENOTFOUND' || error.code === 'EHOSTUNREACH')
    return new UpstreamUnavailableError();
  if (error.code === 'ETIMEDOUT' || error.code === 'ECONNABORTED') return new UpstreamTimeoutError();
  return new BadGatewayError();
}

export function createPassthrough(options: PassthroughOptions): Passthrough {
  const secure = new URL(options.url).protocol === 'https:';
  // 3.x opens a new connection per request unless given a keep-alive agent (docs/architecture.md#http-proxy-middleware).
  const agent = secure
    ? new HttpsAgent({ keepAlive: true, maxSockets: options.maxSockets })
    : new HttpAgent({ keepAlive: true, maxSockets: options.maxSockets });
  const handler = createProxyMiddleware<IncomingMessage, ServerResponse>({
    target: options.url,
    changeOrigin: true,
    agent,
    proxyTimeout: options.timeoutMs,
    timeout: options.timeoutMs,
    // The default plugins write library text into error bodies and log to the console: replaced.
    ejectPlugins: true,
    plugins: [proxyEventsPlugin],
    on: {
      proxyReq(proxyReq) {
        // The client's `Connection: close` would close the pooled upstream connection too.
        proxyReq.removeHeader('connection');
        proxyReq.removeHeader('keep-alive');
      },
      proxyRes(proxyRes) {
        // Hop-by-hop (RFC 9110 §7.6.1): the upstream's `Connection: keep-alive` describes the
        // pooled upstream connection, not the client's; http-proxy then answers with the client's own.
        delete proxyRes.headers.connection;
        delete proxyRes.headers['keep-alive'];
      },
      error(error, req, res) {
        if ('writeHead' in res) {
          if (res.headersSent) res.destroy();
          else writeProblem(res, errorFor(error), requestIdOf(req));
        } else {
          (res as Socket).destroy();
        }
      },
    },
  });
  return { handler, close: () => agent.destroy() };
}
