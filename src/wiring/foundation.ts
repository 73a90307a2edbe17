/**
 * What every part of a replica is built from: the options it was started with, the config file,
 * the logger, the one clock, the metrics, and where each part registers its close.
 */
import type { Logger } from 'pino';
import type { KeySourceOptions } from '../auth/key-source.js';
import type { FileConfig } from '../config/schema.js';
import type { Metrics } from '../observability/metrics.js';
import type { Tracing } from '../observability/tracing.js';
import type { RedisSettings } from '../platform/redis/connection.js';
import type { Closers } from './closers.js';

export interface ProxyAppOptions {
  readonly upstreamUrl: string;
  readonly keys: KeySourceOptions;
  readonly issuer?: string | undefined;
  readonly audience?: string | undefined;
  readonly config: FileConfig;
  readonly logger: Logger;
  /** Without it the cache is in-process (one replica). */
  readonly redis?: RedisSettings | undefined;
  /** Enables the operator API on the admin port (`ADMIN_TOKEN`). */
  readonly adminToken?: string | undefined;
  /**
   * The change feed's token, which may only invalidate (`INVALIDATE_TOKEN`), and a file of such
   * tokens, one a line, re-read while the replica runs (`INVALIDATE_TOKEN_FILE`):
   * docs/operations.md#the-change-feed. Either enables `POST /admin/cache/invalidate`.
   */
  readonly invalidateToken?: string | undefined;
  readonly invalidateTokenFile?: string | undefined;
  readonly now?: () => number;
  /** Each background refresh (stale-while-revalidate), settled when it is done. */
  readonly onBackgroundRefresh?: (settled: Promise<void>) => void;
  /** Node's process metrics on `/metrics` (default on). */
  readonly processMetrics?: boolean;
  /**
   * OpenTelemetry spans for the data plane (docs/operations.md#tracing), made by src/observability/
   * tracing-sdk.ts when an OTLP endpoint is configured; `undefined`: tracing is off.
   */
  readonly tracing?: Tracing | undefined;
}

export interface Foundation {
  readonly options: ProxyAppOptions;
  readonly config: FileConfig;
  readonly logger: Logger;
  /** The one clock every part that reads the time is given. */
  readonly now: () => number;
  readonly metrics: Metrics;
  readonly closers: Closers;
}
