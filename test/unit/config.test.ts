/** The config file and environment: defaults, merging, and start-stopping errors that name the key. */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import {
  ConfigError,
  DEFAULT_CONFIG_FILE,
  ENV_VARIABLES,
  loadEnv,
  parseConfigText,
  SHUTDOWN_MARGIN_SECONDS,
  shutdownPlan,
} from '../../src/config/load.js';
import { BUILT_IN_CONFIG } from '../../src/config/schema.js';

function configErrorKey(run: () => unknown): string {
  try {
    run();
  } catch (error) {
    if (error instanceof ConfigError) return error.key;
    throw error;
  }
  throw new Error('expected a ConfigError');
}

describe('config file', () => {
  it('config/default.yaml shows exactly the built-in defaults', () => {
    const text = readFileSync('config/default.yaml', 'utf8');
    expect(parseYaml(text)).toEqual(BUILT_IN_CONFIG);
    expect(parseConfigText(text, 'config/default.yaml')).toEqual(BUILT_IN_CONFIG);
  });

  it('an empty file is the defaults', () => {
    expect(parseConfigText('', 'empty.yaml')).toEqual(BUILT_IN_CONFIG);
  });

  it('merges an operator file over the defaults key by key', () => {
    const config = parseConfigText(
      'cache:\n  resources:\n    receipts: { ttl: 5, partition: employee }\nupstream:\n  timeout: 2\n',
      'ops.yaml',
    );
    expect(config.cache.resources.receipts).toEqual({ ttl: 5, partition: 'employee' });
    expect(config.cache.resources.warehouses).toEqual({ ttl: 300 });
    expect(config.upstream.timeout).toBe(2);
    expect(config.upstream.maxConcurrent).toBe(BUILT_IN_CONFIG.upstream.maxConcurrent);
  });

  it.each([
    ['an unknown top-level key', 'caches: {}', 'caches'],
    ['an unknown nested key', 'cache:\n  defaults: { tll: 5 }', 'cache.defaults.tll'],
    ['an unknown resource', 'cache:\n  resources:\n    widgets: { ttl: 5 }', 'cache.resources.widgets'],
    ['a negative duration', 'cache:\n  defaults: { ttl: -1 }', 'cache.defaults.ttl'],
    ['a fractional ttl', 'cache:\n  defaults: { ttl: 1.5 }', 'cache.defaults.ttl'],
    ['a string where a number goes', 'upstream: { timeout: "10" }', 'upstream.timeout'],
    ['an unknown partition', 'cache: { partition: tenant }', 'cache.partition'],
    ['a zero rate', 'rateLimit:\n  perCompany: { points: 0, duration: 60 }', 'rateLimit.perCompany.points'],
    ['a non-boolean switch', 'upstream: { passthrough: "yes" }', 'upstream.passthrough'],
    ['an empty claim name', 'auth:\n  claims: { company: "" }', 'auth.claims.company'],
    [
      'automatic lifetimes whose min exceeds max',
      'cache:\n  resources:\n    movements: { autoTtl: { min: 60, max: 10 } }',
      'cache.resources.movements.autoTtl.max',
    ],
    [
      'a negative ceiling of early refreshes',
      'cache:\n  autoTtl: { maxRefreshesPerSecond: -1 }',
      'cache.autoTtl.maxRefreshesPerSecond',
    ],
  ])('%s stops the start, naming %s', (_label, text, key) => {
    expect(configErrorKey(() => parseConfigText(text, 'ops.yaml'))).toBe(key);
  });

  it('a file that is not YAML, or not a mapping, names the file', () => {
    expect(configErrorKey(() => parseConfigText('cache: [', 'ops.yaml'))).toBe('ops.yaml');
    expect(configErrorKey(() => parseConfigText('- 1\n- 2', 'ops.yaml'))).toBe('ops.yaml');
  });
});

describe('environment', () => {
  it('has the documented defaults', () => {
    const env = loadEnv({});
    expect(env).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      adminPort: 9090,
      configFile: DEFAULT_CONFIG_FILE,
      logLevel: 'info',
    });
    // The package's own file, found from the code's location rather than the working directory.
    expect(DEFAULT_CONFIG_FILE).toBe(resolve('config/default.yaml'));
    expect(env.upstreamUrl).toBeUndefined();
    expect(env.keySource).toBeUndefined();
    expect(env).toMatchObject({ drainSeconds: 10, shutdownDelaySeconds: 0 });
  });

  it('reads exactly the variables it lists (ENV_VARIABLES), and no other', () => {
    const read = new Set<string>();
    const recorder = new Proxy({} as Record<string, string | undefined>, {
      get(_target, name) {
        if (typeof name === 'string') read.add(name);
        return undefined;
      },
    });
    loadEnv(recorder);
    expect([...read].sort()).toEqual([...ENV_VARIABLES].sort());
  });

  it('reads the change feed’s token and its file, and refuses a feed token that is the admin token', () => {
    expect(loadEnv({ INVALIDATE_TOKEN: 'feed', INVALIDATE_TOKEN_FILE: '/run/feed/tokens' })).toMatchObject({
      adminToken: undefined,
      invalidateToken: 'feed',
      invalidateTokenFile: '/run/feed/tokens',
    });
    expect(loadEnv({ INVALIDATE_TOKEN: ' ' }).invalidateToken).toBeUndefined();
    expect(configErrorKey(() => loadEnv({ ADMIN_TOKEN: 'same', INVALIDATE_TOKEN: 'same' }))).toBe('INVALIDATE_TOKEN');
  });

  it('reads the drain bound and the delay before it, in whole seconds', () => {
    expect(loadEnv({ DRAIN_SECONDS: '25', SHUTDOWN_DELAY_SECONDS: '5' })).toMatchObject({
      drainSeconds: 25,
      shutdownDelaySeconds: 5,
    });
    expect(loadEnv({ DRAIN_SECONDS: '0', SHUTDOWN_DELAY_SECONDS: '0' })).toMatchObject({
      drainSeconds: 0,
      shutdownDelaySeconds: 0,
    });
  });

  it('plans a shutdown: the delay, then the drain, then a forced exit after a margin', () => {
    expect(shutdownPlan({ shutdownDelaySeconds: 5, drainSeconds: 10 })).toEqual({
      delayMs: 5_000,
      drainMs: 10_000,
      limitMs: (15 + SHUTDOWN_MARGIN_SECONDS) * 1000,
    });
    expect(shutdownPlan(loadEnv({}))).toEqual({
      delayMs: 0,
      drainMs: 10_000,
      limitMs: (10 + SHUTDOWN_MARGIN_SECONDS) * 1000,
    });
  });

  it.each([
    ['PORT', { PORT: 'eighty' }],
    ['PORT', { PORT: '70000' }],
    ['ADMIN_PORT', { ADMIN_PORT: '-1' }],
    ['UPSTREAM_URL', { UPSTREAM_URL: 'ftp://example.test' }],
    ['UPSTREAM_URL', { UPSTREAM_URL: 'not a url' }],
    ['REDIS_URL', { REDIS_URL: 'http://localhost:6379' }],
    ['REDIS_CLUSTER_NODES', { REDIS_CLUSTER_NODES: 'a:1,b' }],
    ['LOG_LEVEL', { LOG_LEVEL: 'loud' }],
    ['JWT_ALGORITHMS', { JWT_ALGORITHMS: 'HS256,none' }],
    ['JWT_JWKS_URL, JWT_SECRET', { JWT_JWKS_URL: 'https://keys.test/jwks', JWT_SECRET: 's' }],
    ['JWT_PUBLIC_KEY_FILE', { JWT_PUBLIC_KEY_FILE: '/nonexistent/key.pem' }],
    ['DRAIN_SECONDS', { DRAIN_SECONDS: '1.5' }],
    ['DRAIN_SECONDS', { DRAIN_SECONDS: '-1' }],
    ['DRAIN_SECONDS', { DRAIN_SECONDS: '1e2' }],
    ['DRAIN_SECONDS', { DRAIN_SECONDS: '3601' }],
    ['SHUTDOWN_DELAY_SECONDS', { SHUTDOWN_DELAY_SECONDS: ' 5' }],
    ['SHUTDOWN_DELAY_SECONDS', { SHUTDOWN_DELAY_SECONDS: '05' }],
    ['SHUTDOWN_DELAY_SECONDS', { SHUTDOWN_DELAY_SECONDS: '601' }],
  ])('a bad %s stops the start, naming it', (key, env) => {
    expect(configErrorKey(() => loadEnv(env))).toBe(key);
  });

  it('reads each key source', () => {
    expect(loadEnv({ JWT_SECRET: 'x'.repeat(32) }).keySource).toEqual({ kind: 'secret', secret: 'x'.repeat(32) });
    expect(loadEnv({ JWT_JWKS_URL: 'https://keys.test/jwks' }).keySource).toEqual({
      kind: 'jwks',
      url: 'https://keys.test/jwks',
    });
    expect(loadEnv({ JWT_PUBLIC_KEY: '-----BEGIN PUBLIC KEY-----' }).keySource).toEqual({
      kind: 'public-key',
      key: '-----BEGIN PUBLIC KEY-----',
    });
    expect(loadEnv({ JWT_ALGORITHMS: 'RS256, ES256' }).jwtAlgorithms).toEqual(['RS256', 'ES256']);
  });
});

describe('tracing environment (docs/operations.md#tracing)', () => {
  it('is off without an OTLP endpoint, whatever else is set', () => {
    expect(loadEnv({}).tracing).toBeUndefined();
    expect(loadEnv({ OTEL_SERVICE_NAME: 'edge', OTEL_TRACES_SAMPLER: 'always_on' }).tracing).toBeUndefined();
  });

  it('appends v1/traces to the base endpoint, and takes the traces endpoint as it is (OTLP/HTTP spec)', () => {
    expect(loadEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' }).tracing).toEqual({
      endpoint: 'http://collector:4318/v1/traces',
      serviceName: 'slab-ops-proxy',
      sampler: 'parentbased_always_on',
      samplerRatio: 1,
    });
    expect(loadEnv({ OTEL_EXPORTER_OTLP_ENDPOINT: 'https://otel.example/base/' }).tracing?.endpoint).toBe(
      'https://otel.example/base/v1/traces',
    );
    expect(
      loadEnv({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://traces:9999/custom/path',
      }).tracing?.endpoint,
    ).toBe('http://traces:9999/custom/path');
  });

  it('honours the service name, the sampler and its ratio; OTEL_SDK_DISABLED=true turns it off', () => {
    const base = { OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318' };
    expect(
      loadEnv({ ...base, OTEL_SERVICE_NAME: 'slab-edge eu', OTEL_TRACES_SAMPLER: 'ParentBased_TraceIdRatio' }).tracing,
    ).toMatchObject({ serviceName: 'slab-edge eu', sampler: 'parentbased_traceidratio', samplerRatio: 1 });
    expect(
      loadEnv({ ...base, OTEL_TRACES_SAMPLER: 'traceidratio', OTEL_TRACES_SAMPLER_ARG: '0.25' }).tracing,
    ).toMatchObject({ sampler: 'traceidratio', samplerRatio: 0.25 });
    expect(loadEnv({ ...base, OTEL_TRACES_SAMPLER_ARG: '0' }).tracing?.samplerRatio).toBe(0);
    expect(loadEnv({ ...base, OTEL_SDK_DISABLED: 'TRUE' }).tracing).toBeUndefined();
    expect(loadEnv({ ...base, OTEL_SDK_DISABLED: 'false' }).tracing).toBeDefined();
  });

  it.each([
    ['OTEL_EXPORTER_OTLP_ENDPOINT', { OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318' }],
    ['OTEL_EXPORTER_OTLP_ENDPOINT', { OTEL_EXPORTER_OTLP_ENDPOINT: 'grpc://collector:4317' }],
    ['OTEL_EXPORTER_OTLP_TRACES_ENDPOINT', { OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'not a url' }],
    ['OTEL_TRACES_SAMPLER', { OTEL_TRACES_SAMPLER: 'jaeger_remote' }],
    ['OTEL_TRACES_SAMPLER_ARG', { OTEL_TRACES_SAMPLER_ARG: '1.5' }],
    ['OTEL_TRACES_SAMPLER_ARG', { OTEL_TRACES_SAMPLER_ARG: '1e-1' }],
    ['OTEL_TRACES_SAMPLER_ARG', { OTEL_TRACES_SAMPLER_ARG: '-0.1' }],
    ['OTEL_SERVICE_NAME', { OTEL_SERVICE_NAME: 'line\nbreak' }],
  ])('a bad %s stops the start, naming it (also while no endpoint is set)', (key, env) => {
    expect(configErrorKey(() => loadEnv(env))).toBe(key);
  });
});
