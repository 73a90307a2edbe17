/**
 * Starts the real parts in-process on free ports: the sandbox system of record (with its test-only
 * control) and the proxy in front of it. Everything talks real HTTP over loopback.
 */
import { pino } from 'pino';
import { createProxyApp, type ProxyApp } from '../../src/app.js';
import type { KeySourceOptions } from '../../src/auth/key-source.js';
import { mergeOver, validateFileConfig } from '../../src/config/load.js';
import { BUILT_IN_CONFIG, type FileConfig } from '../../src/config/schema.js';
import type { Tracing } from '../../src/observability/tracing.js';
import type { SandboxOptions } from '../../src/sandbox/server.js';
import { DEV_KEYS, startSandbox } from './sandbox.js';

export { DEV_KEYS, startSandbox, upstreamCount, upstreamTarget } from './sandbox.js';

/**
 * Caching off: every read goes to the upstream. For suites about forwarding itself (error mapping,
 * forwarded headers, the upstream's own 429), where a cached answer would hide what they test.
 */
export const NO_CACHE = {
  cache: {
    defaults: { ttl: 0, staleWhileRevalidate: 0, staleIfError: 0, notFoundTtl: 0 },
    resources: { warehouses: { ttl: 0 }, movements: { ttl: 0 } },
  },
} as const;

/**
 * Limits high enough that no suite meets them by accident (some send thousands of requests with
 * one token); the suites about limits set their own `rateLimit`.
 */
const GENEROUS_LIMITS = {
  rateLimit: { perCredential: { points: 1_000_000, duration: 60 }, perCompany: { points: 1_000_000, duration: 60 } },
};

/** A config document over the built-in defaults, validated as the start would. */
export function configWith(overrides: Record<string, unknown> = {}): FileConfig {
  return validateFileConfig(mergeOver(BUILT_IN_CONFIG, overrides));
}

export interface ProxyHandle {
  readonly app: ProxyApp;
  readonly url: string;
  /** With `adminToken` (or the change feed's token): the admin port's base URL. */
  readonly adminUrl: string | undefined;
  close(): Promise<void>;
}

export interface StartProxyOptions {
  readonly upstreamUrl: string;
  readonly keys?: KeySourceOptions;
  readonly config?: Record<string, unknown>;
  readonly issuer?: string;
  readonly audience?: string;
  readonly logger?: pino.Logger;
  readonly redisUrl?: string;
  readonly now?: () => number;
  readonly onBackgroundRefresh?: (settled: Promise<void>) => void;
  /** Starts the admin port too, with the operator API behind this token. */
  readonly adminToken?: string;
  /** Starts the admin port too, with `POST /admin/cache/invalidate` behind the change feed's token (or file of them). */
  readonly invalidateToken?: string;
  readonly invalidateTokenFile?: string;
  /** OpenTelemetry tracing (a test's in-memory exporter, or a real OTLP export). */
  readonly tracing?: Tracing;
}

export async function startProxy(options: StartProxyOptions): Promise<ProxyHandle> {
  const app = await createProxyApp({
    upstreamUrl: options.upstreamUrl,
    keys: options.keys ?? DEV_KEYS,
    issuer: options.issuer,
    audience: options.audience,
    config: configWith(mergeOver(GENEROUS_LIMITS, options.config ?? {}) as Record<string, unknown>),
    logger: options.logger ?? pino({ level: 'silent' }),
    ...(options.redisUrl !== undefined && { redis: { url: options.redisUrl } }),
    ...(options.now !== undefined && { now: options.now }),
    ...(options.onBackgroundRefresh !== undefined && { onBackgroundRefresh: options.onBackgroundRefresh }),
    ...(options.adminToken !== undefined && { adminToken: options.adminToken }),
    ...(options.invalidateToken !== undefined && { invalidateToken: options.invalidateToken }),
    ...(options.invalidateTokenFile !== undefined && { invalidateTokenFile: options.invalidateTokenFile }),
    ...(options.tracing !== undefined && { tracing: options.tracing }),
  });
  const operator = [options.adminToken, options.invalidateToken, options.invalidateTokenFile].some(
    (setting) => setting !== undefined,
  );
  const { port, adminPort } = await app.listen({ port: 0, host: '127.0.0.1', ...(operator && { adminPort: 0 }) });
  // Reads are refused until the operator state has been read (with Redis: a state settled there).
  await app.control.confirmation;
  return {
    app,
    url: `http://127.0.0.1:${port}`,
    adminUrl: adminPort === undefined ? undefined : `http://127.0.0.1:${adminPort}`,
    close: () => app.close(),
  };
}

/** A sandbox with a proxy in front of it: the usual test bed. */
export async function startStack(
  proxy: Omit<StartProxyOptions, 'upstreamUrl'> = {},
  sandboxOptions: Partial<SandboxOptions> = {},
) {
  const sandbox = await startSandbox(sandboxOptions);
  const handle = await startProxy({ ...proxy, upstreamUrl: sandbox.url });
  return {
    sandbox,
    proxy: handle,
    async close() {
      await handle.close();
      await sandbox.close();
    },
  };
}
