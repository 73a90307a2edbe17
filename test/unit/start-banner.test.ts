/**
 * The start banner's facts (docs/operations.md#reload-start-and-shutdown): the store the app built, named as configured
 * (in-process, Redis, Redis Cluster), the upstream and the key source, never with a credential.
 */
import { describe, expect, it } from 'vitest';
import { bannerLines, type StartFactsInput, startFacts } from '../../src/cli/start-banner.js';
import { loadEnv } from '../../src/config/load.js';

function facts(rawEnv: Record<string, string>, overrides: Partial<StartFactsInput> = {}) {
  return startFacts({
    env: loadEnv(rawEnv),
    rawEnv,
    port: 8080,
    adminPort: 9090,
    upstreamUrl: rawEnv.UPSTREAM_URL ?? 'http://127.0.0.1:40001',
    embeddedSandbox: rawEnv.UPSTREAM_URL === undefined,
    storeKind: rawEnv.REDIS_URL !== undefined || rawEnv.REDIS_CLUSTER_NODES !== undefined ? 'redis' : 'memory',
    ...overrides,
  });
}

describe('startFacts', () => {
  it('the embedded default: in-process store, the sandbox, the development secret, no operator API', () => {
    expect(facts({})).toEqual({
      url: 'http://127.0.0.1:8080',
      port: 8080,
      adminPort: 9090,
      operatorApi: false,
      invalidateTokens: 'off',
      upstream: 'the embedded sandbox at http://127.0.0.1:40001',
      store: 'in-process (one replica)',
      keys: 'the development secret (HS256; embedded default only)',
      tracing: 'off',
    });
  });

  it('Redis without its password; TLS and the database named', () => {
    expect(facts({ REDIS_URL: 'rediss://cache:s3cret-pass@redis.internal:6380/2' }).store).toBe(
      'Redis at redis.internal:6380 (database 2, TLS)',
    );
    expect(facts({ REDIS_URL: 'redis://redis.internal' }).store).toBe('Redis at redis.internal:6379 (database 0)');
  });

  it('Redis Cluster by its seed nodes, which win over REDIS_URL as they do in the app', () => {
    expect(
      facts({ REDIS_CLUSTER_NODES: 'a.internal:7000,b.internal:7001', REDIS_URL: 'redis://ignored:6379' }).store,
    ).toBe('Redis Cluster (seed nodes a.internal:7000, b.internal:7001)');
  });

  it('the store the app built, whatever the variables say', () => {
    expect(facts({ REDIS_URL: 'redis://redis.internal' }, { storeKind: 'memory' }).store).toBe(
      'in-process (one replica)',
    );
  });

  it('the upstream and the JWKS without userinfo or query; the key source by its variable', () => {
    const production = facts({
      UPSTREAM_URL: 'https://reader:pw@ops.example/api',
      JWT_JWKS_URL: 'https://user:pw@issuer.example/jwks.json?client_secret=x',
      JWT_ALGORITHMS: 'RS256,ES256',
      ADMIN_TOKEN: 'a-long-admin-token-of-some-sort',
    });
    expect(production).toMatchObject({
      upstream: 'https://ops.example/api',
      keys: 'JWKS at https://issuer.example/jwks.json (RS256, ES256)',
      operatorApi: true,
    });
    expect(JSON.stringify(production)).not.toMatch(/pw|client_secret|a-long-admin-token/);
    expect(facts({ UPSTREAM_URL: 'https://ops.example', JWT_SECRET: 'x'.repeat(32) }).keys).toBe('JWT_SECRET (HMAC)');
    expect(facts({ UPSTREAM_URL: 'https://ops.example', JWT_PUBLIC_KEY: '{"kty":"OKP"}' }).keys).toBe('JWT_PUBLIC_KEY');
  });

  it('names where the change feed’s tokens come from, never a token', () => {
    const both = facts({
      INVALIDATE_TOKEN: 'a-feed-token-of-some-length',
      INVALIDATE_TOKEN_FILE: '/run/secrets/feed/tokens',
    });
    expect(both).toMatchObject({
      operatorApi: false,
      invalidateTokens: 'INVALIDATE_TOKEN, INVALIDATE_TOKEN_FILE (/run/secrets/feed/tokens)',
    });
    expect(JSON.stringify(both)).not.toContain('a-feed-token-of-some-length');
    expect(bannerLines(both)[0]).toBe(
      'slab-ops-proxy listening on http://127.0.0.1:8080 (admin on port 9090, operator API off (set ADMIN_TOKEN), invalidations also with INVALIDATE_TOKEN, INVALIDATE_TOKEN_FILE (/run/secrets/feed/tokens))',
    );
  });

  it('an IPv6 bind address is bracketed; the banner names every fact', () => {
    const shown = facts({ HOST: '::1' });
    expect(shown.url).toBe('http://[::1]:8080');
    expect(bannerLines(shown)).toEqual([
      'slab-ops-proxy listening on http://[::1]:8080 (admin on port 9090, operator API off (set ADMIN_TOKEN))',
      '  upstream:    the embedded sandbox at http://127.0.0.1:40001',
      '  cache store: in-process (one replica)',
      '  token keys:  the development secret (HS256; embedded default only)',
      '  tracing:     off',
    ]);
  });

  it('where traces go, without the endpoint credentials, and how they are sampled', () => {
    const traced = facts({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'https://ingest:otlp-secret@collector.example:4318?api_key=k',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: '0.1',
    });
    expect(traced.tracing).toBe(
      'OTLP/HTTP to https://collector.example:4318/v1/traces (service slab-ops-proxy, sampler parentbased_traceidratio 0.1)',
    );
    expect(JSON.stringify(traced)).not.toMatch(/otlp-secret|api_key/);
    expect(facts({ OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'http://127.0.0.1:4318/v1/traces' }).tracing).toBe(
      'OTLP/HTTP to http://127.0.0.1:4318/v1/traces (service slab-ops-proxy, sampler parentbased_always_on)',
    );
  });
});
