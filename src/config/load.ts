/**
 * Loads the effective configuration: the built-in defaults, the operator's YAML file merged over
 * them key by key, and the environment (docs/configuration.md#environment). Every problem is a `ConfigError` naming the
 * key or variable, so a bad start says exactly what to fix.
 */
import { readFileSync } from 'node:fs';
import type { LevelWithSilent } from 'pino';
import { parse as parseYaml } from 'yaml';
import { LOG_LEVELS } from '../observability/logger.js';
import {
  DEFAULT_SAMPLER,
  DEFAULT_SERVICE_NAME,
  TRACES_SAMPLERS,
  type TracingSettings,
} from '../observability/tracing-sdk.js';
import { packageFile } from '../platform/package.js';
import { BUILT_IN_CONFIG, configSchema, type FileConfig } from './schema.js';

export class ConfigError extends Error {
  constructor(
    readonly key: string,
    problem: string,
  ) {
    super(`${key}: ${problem}`);
  }
}

export type KeySourceSetting =
  | { readonly kind: 'jwks'; readonly url: string }
  | { readonly kind: 'public-key'; readonly key: string }
  | { readonly kind: 'secret'; readonly secret: string };

export interface EnvConfig {
  readonly port: number;
  readonly host: string;
  readonly upstreamUrl: string | undefined;
  readonly redisUrl: string | undefined;
  readonly redisClusterNodes: readonly string[] | undefined;
  /** A Redis of its own for the operator state (persistent); else the cache's Redis. */
  readonly controlRedisUrl: string | undefined;
  readonly keySource: KeySourceSetting | undefined;
  readonly jwtAlgorithms: readonly string[] | undefined;
  readonly jwtIssuer: string | undefined;
  readonly jwtAudience: string | undefined;
  readonly configFile: string;
  readonly adminPort: number;
  readonly adminToken: string | undefined;
  /** A token that may only invalidate (`POST /admin/cache/invalidate`): the change feed's. */
  readonly invalidateToken: string | undefined;
  /** A file of such tokens, one a line, re-read while the proxy runs (docs/operations.md#the-change-feed). */
  readonly invalidateTokenFile: string | undefined;
  readonly logLevel: LevelWithSilent;
  /** In-flight requests get this long to finish after `SIGTERM`; then their connections are cut. */
  readonly drainSeconds: number;
  /** After `SIGTERM`, the client port keeps serving this long (with `/readyz` 503) before the drain. */
  readonly shutdownDelaySeconds: number;
  /** OpenTelemetry tracing, on only when an OTLP endpoint is set (docs/operations.md#tracing). */
  readonly tracing: TracingSettings | undefined;
}

export interface Config {
  readonly env: EnvConfig;
  readonly file: FileConfig;
}

/** The package's own `config/default.yaml`, wherever the process was started from. */
export const DEFAULT_CONFIG_FILE = packageFile('config/default.yaml');

/**
 * Every environment variable the proxy reads (docs/configuration.md#environment), in one place: `loadEnv`
 * reads through these names only, and the deployment tests check that manifests set no other.
 */
export const ENV_VARIABLES = [
  'PORT',
  'HOST',
  'UPSTREAM_URL',
  'REDIS_URL',
  'REDIS_CLUSTER_NODES',
  'CONTROL_REDIS_URL',
  'JWT_JWKS_URL',
  'JWT_PUBLIC_KEY',
  'JWT_PUBLIC_KEY_FILE',
  'JWT_SECRET',
  'JWT_ALGORITHMS',
  'JWT_ISSUER',
  'JWT_AUDIENCE',
  'CONFIG_FILE',
  'ADMIN_PORT',
  'ADMIN_TOKEN',
  'INVALIDATE_TOKEN',
  'INVALIDATE_TOKEN_FILE',
  'LOG_LEVEL',
  'DRAIN_SECONDS',
  'SHUTDOWN_DELAY_SECONDS',
  'OTEL_EXPORTER_OTLP_ENDPOINT',
  'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
  'OTEL_SERVICE_NAME',
  'OTEL_TRACES_SAMPLER',
  'OTEL_TRACES_SAMPLER_ARG',
  'OTEL_SDK_DISABLED',
] as const;

export type EnvVariable = (typeof ENV_VARIABLES)[number];

type Env = Readonly<Record<string, string | undefined>>;

function nonEmpty(env: Env, name: EnvVariable): string | undefined {
  const value = env[name];
  return value === undefined || value.trim() === '' ? undefined : value;
}

function port(env: Env, name: EnvVariable, fallback: number): number {
  const value = nonEmpty(env, name);
  if (value === undefined) return fallback;
  if (!/^[0-9]{1,5}$/.test(value) || Number(value) > 65_535)
    throw new ConfigError(name, 'must be a port number (0-65535)');
  return Number(value);
}

/** Whole seconds, grammar first: `Number()` alone would read `1e2`, `" 5"` and `0x10` as numbers. */
function wholeSeconds(env: Env, name: EnvVariable, fallback: number, max: number): number {
  const value = nonEmpty(env, name);
  if (value === undefined) return fallback;
  if (!/^(?:0|[1-9][0-9]{0,4})$/.test(value) || Number(value) > max)
    throw new ConfigError(name, `must be whole seconds (0-${String(max)})`);
  return Number(value);
}

/** `DRAIN_SECONDS` when unset: in-flight requests get 10 s after `SIGTERM`. */
export const DEFAULT_DRAIN_SECONDS = 10;
/** The longest drain and pre-drain delay accepted: longer belongs to a deploy, not a shutdown. */
const MAX_DRAIN_SECONDS = 3_600;
const MAX_SHUTDOWN_DELAY_SECONDS = 600;

function httpUrl(env: Env, name: EnvVariable, protocols: readonly string[]): string | undefined {
  const value = nonEmpty(env, name);
  if (value === undefined) return undefined;
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw new ConfigError(name, 'must be an absolute URL');
  }
  if (!protocols.includes(url.protocol)) throw new ConfigError(name, `must use ${protocols.join(' or ')}`);
  return value;
}

function keySource(env: Env): KeySourceSetting | undefined {
  const jwks = httpUrl(env, 'JWT_JWKS_URL', ['http:', 'https:']);
  const inlineKey = nonEmpty(env, 'JWT_PUBLIC_KEY');
  const keyFile = nonEmpty(env, 'JWT_PUBLIC_KEY_FILE');
  const secret = nonEmpty(env, 'JWT_SECRET');
  const given = [
    jwks && 'JWT_JWKS_URL',
    inlineKey && 'JWT_PUBLIC_KEY',
    keyFile && 'JWT_PUBLIC_KEY_FILE',
    secret && 'JWT_SECRET',
  ].filter((name): name is string => typeof name === 'string');
  if (given.length > 1) throw new ConfigError(given.join(', '), 'set only one key source');
  if (jwks !== undefined) return { kind: 'jwks', url: jwks };
  if (inlineKey !== undefined) return { kind: 'public-key', key: inlineKey };
  if (keyFile !== undefined) {
    try {
      return { kind: 'public-key', key: readFileSync(keyFile, 'utf8') };
    } catch {
      throw new ConfigError('JWT_PUBLIC_KEY_FILE', `cannot read ${keyFile}`);
    }
  }
  if (secret !== undefined) return { kind: 'secret', secret };
  return undefined;
}

/** `OTEL_TRACES_SAMPLER_ARG`: a decimal ratio from 0 to 1 (the spec's default 1.0 when unset). */
const RATIO = /^(?:0(?:\.[0-9]{1,16})?|1(?:\.0{1,16})?|\.[0-9]{1,16})$/;
/** `OTEL_SERVICE_NAME`: printable, one line. */
const SERVICE_NAME = /^[\x21-\x7e](?:[\x20-\x7e]{0,126}[\x21-\x7e])?$/;

/**
 * Where spans go, per the OTLP exporter specification ("Endpoint URLs for OTLP/HTTP"): the
 * signal-specific `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as it is, else the base URL
 * `OTEL_EXPORTER_OTLP_ENDPOINT` with `v1/traces` appended to its path.
 */
function tracesEndpoint(env: Env): string | undefined {
  const specific = httpUrl(env, 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', ['http:', 'https:']);
  const base = httpUrl(env, 'OTEL_EXPORTER_OTLP_ENDPOINT', ['http:', 'https:']);
  if (specific !== undefined) return specific;
  if (base === undefined) return undefined;
  const url = new URL(base);
  url.pathname = `${url.pathname.replace(/\/+$/, '')}/v1/traces`;
  return url.href;
}

/**
 * Tracing is on only with an OTLP endpoint, and off with `OTEL_SDK_DISABLED=true` (the SDK
 * specification's switch, any case). Unlike the SDK's own defaulting, a bad value stops the start
 * naming the variable, as every other variable does here.
 */
/** `value` as one of `allowed`, or the start stops naming the variable and the values it takes. */
function oneOf<T extends string>(name: string, value: string, allowed: readonly T[]): T {
  const chosen = allowed.find((option) => option === value);
  if (chosen === undefined) throw new ConfigError(name, `must be one of ${allowed.join(', ')}`);
  return chosen;
}

function tracingSettings(env: Env): TracingSettings | undefined {
  const endpoint = tracesEndpoint(env);
  const serviceName = nonEmpty(env, 'OTEL_SERVICE_NAME') ?? DEFAULT_SERVICE_NAME;
  if (!SERVICE_NAME.test(serviceName))
    throw new ConfigError('OTEL_SERVICE_NAME', 'must be 1-128 printable ASCII characters');
  const sampler = oneOf(
    'OTEL_TRACES_SAMPLER',
    (nonEmpty(env, 'OTEL_TRACES_SAMPLER') ?? DEFAULT_SAMPLER).trim().toLowerCase(),
    TRACES_SAMPLERS,
  );
  const ratioText = nonEmpty(env, 'OTEL_TRACES_SAMPLER_ARG')?.trim();
  if (ratioText !== undefined && !RATIO.test(ratioText))
    throw new ConfigError('OTEL_TRACES_SAMPLER_ARG', 'must be a ratio from 0 to 1, e.g. 0.25');
  const disabled = nonEmpty(env, 'OTEL_SDK_DISABLED')?.trim().toLowerCase() === 'true';
  if (endpoint === undefined || disabled) return undefined;
  return {
    endpoint,
    serviceName,
    sampler,
    samplerRatio: ratioText === undefined ? 1 : Number(ratioText),
  };
}

/**
 * `ADMIN_TOKEN`, and the change feed's `INVALIDATE_TOKEN`, which must differ from it: a feed
 * holding the admin token could revoke, purge and block, what its own token exists to prevent.
 * `INVALIDATE_TOKEN_FILE` is only named here; its tokens are read when the app starts.
 */
function operatorTokens(env: Env): Pick<EnvConfig, 'adminToken' | 'invalidateToken' | 'invalidateTokenFile'> {
  const adminToken = nonEmpty(env, 'ADMIN_TOKEN');
  const invalidateToken = nonEmpty(env, 'INVALIDATE_TOKEN');
  if (invalidateToken !== undefined && invalidateToken === adminToken)
    throw new ConfigError('INVALIDATE_TOKEN', 'must differ from ADMIN_TOKEN (it is the one that cannot revoke)');
  return { adminToken, invalidateToken, invalidateTokenFile: nonEmpty(env, 'INVALIDATE_TOKEN_FILE') };
}

export function loadEnv(env: Env): EnvConfig {
  const logLevel = oneOf('LOG_LEVEL', nonEmpty(env, 'LOG_LEVEL') ?? 'info', LOG_LEVELS);
  const algorithms = nonEmpty(env, 'JWT_ALGORITHMS')
    ?.split(',')
    .map((a) => a.trim())
    .filter((a) => a !== '');
  if (algorithms?.some((a) => a.toLowerCase() === 'none'))
    throw new ConfigError('JWT_ALGORITHMS', '"none" is never accepted');
  const clusterNodes = nonEmpty(env, 'REDIS_CLUSTER_NODES')
    ?.split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  for (const node of clusterNodes ?? []) {
    if (!/^[A-Za-z0-9.-]+:[0-9]{1,5}$/.test(node))
      throw new ConfigError('REDIS_CLUSTER_NODES', `"${node}" is not host:port`);
  }
  const controlRedisUrl = httpUrl(env, 'CONTROL_REDIS_URL', ['redis:', 'rediss:']);
  if (controlRedisUrl !== undefined && nonEmpty(env, 'REDIS_URL') === undefined && clusterNodes === undefined) {
    throw new ConfigError(
      'CONTROL_REDIS_URL',
      'is for replicas sharing REDIS_URL or REDIS_CLUSTER_NODES; set one of them too',
    );
  }
  return {
    port: port(env, 'PORT', 8080),
    host: nonEmpty(env, 'HOST') ?? '0.0.0.0',
    upstreamUrl: httpUrl(env, 'UPSTREAM_URL', ['http:', 'https:']),
    redisUrl: httpUrl(env, 'REDIS_URL', ['redis:', 'rediss:']),
    redisClusterNodes: clusterNodes,
    controlRedisUrl,
    keySource: keySource(env),
    jwtAlgorithms: algorithms,
    jwtIssuer: nonEmpty(env, 'JWT_ISSUER'),
    jwtAudience: nonEmpty(env, 'JWT_AUDIENCE'),
    configFile: nonEmpty(env, 'CONFIG_FILE') ?? DEFAULT_CONFIG_FILE,
    adminPort: port(env, 'ADMIN_PORT', 9090),
    ...operatorTokens(env),
    logLevel,
    drainSeconds: wholeSeconds(env, 'DRAIN_SECONDS', DEFAULT_DRAIN_SECONDS, MAX_DRAIN_SECONDS),
    shutdownDelaySeconds: wholeSeconds(env, 'SHUTDOWN_DELAY_SECONDS', 0, MAX_SHUTDOWN_DELAY_SECONDS),
    tracing: tracingSettings(env),
  };
}

/** A shutdown that has not finished this long after its drain (a hung close) exits with 1 rather than never. */
export const SHUTDOWN_MARGIN_SECONDS = 5;

export interface ShutdownPlan {
  /** From `SIGTERM` to the drain: `/readyz` says 503 `draining` while the client port still serves. */
  readonly delayMs: number;
  /** In-flight requests' bound once the client port stops accepting. */
  readonly drainMs: number;
  /** From `SIGTERM` to a forced exit 1: an orchestrator's grace period must be at least this. */
  readonly limitMs: number;
}

export function shutdownPlan(env: Pick<EnvConfig, 'drainSeconds' | 'shutdownDelaySeconds'>): ShutdownPlan {
  const delayMs = env.shutdownDelaySeconds * 1000;
  const drainMs = env.drainSeconds * 1000;
  return { delayMs, drainMs, limitMs: delayMs + drainMs + SHUTDOWN_MARGIN_SECONDS * 1000 };
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** The operator's values over the defaults, key by key; unknown keys are kept so the schema names them. */
export function mergeOver(base: unknown, override: unknown): unknown {
  if (!isPlainObject(base) || !isPlainObject(override)) return override === undefined ? base : override;
  const merged: Record<string, unknown> = { ...base };
  for (const [key, value] of Object.entries(override)) merged[key] = mergeOver(base[key], value);
  return merged;
}

/** Validates a parsed config document (already merged over the defaults). */
export function validateFileConfig(document: unknown): FileConfig {
  const result = configSchema.safeParse(document);
  if (result.success) return result.data;
  const issue = result.error.issues[0];
  if (issue === undefined) throw new ConfigError('(config)', 'invalid');
  const path = issue.path.map(String).join('.');
  if (issue.code === 'unrecognized_keys') {
    const key = [path, issue.keys[0]].filter((p) => p !== '' && p !== undefined).join('.');
    throw new ConfigError(key, 'unknown key');
  }
  throw new ConfigError(path === '' ? '(config)' : path, issue.message);
}

/** Parses YAML text as the operator's config: defaults for every key it leaves out. */
export function parseConfigText(text: string, fileName: string): FileConfig {
  let document: unknown;
  try {
    document = parseYaml(text);
  } catch (error) {
    throw new ConfigError(
      fileName,
      `not valid YAML (${error instanceof Error ? error.message.split('\n')[0] : 'parse error'})`,
    );
  }
  if (document === null || document === undefined) document = {};
  if (!isPlainObject(document)) throw new ConfigError(fileName, 'must be a YAML mapping');
  return validateFileConfig(mergeOver(BUILT_IN_CONFIG, document));
}

export function loadConfigFile(fileName: string): FileConfig {
  let text: string;
  try {
    text = readFileSync(fileName, 'utf8');
  } catch {
    throw new ConfigError('CONFIG_FILE', `cannot read ${fileName}`);
  }
  return parseConfigText(text, fileName);
}

export function loadConfig(env: Env): Config {
  const envConfig = loadEnv(env);
  return { env: envConfig, file: loadConfigFile(envConfig.configFile) };
}
