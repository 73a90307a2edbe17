/**
 * What `npm start` says once it serves (docs/operations.md#reload-start-and-shutdown): the address, the admin port and
 * whether the operator API is on, where the change feed's tokens come from (never a token), the upstream, the cache store the app actually built (in-process,
 * Redis or Redis Cluster), the key source and where traces go. The embedded default prints it as text for a person;
 * a production start logs the same facts as one JSON line. Addresses are shown without userinfo
 * or query: a password in `REDIS_URL`, `UPSTREAM_URL`, `JWT_JWKS_URL` or an OTLP endpoint is never printed.
 */
import type { EnvConfig } from '../config/load.js';

export interface StartFacts {
  /** The client port's base URL, as a client on this machine reaches it. */
  readonly url: string;
  readonly port: number;
  readonly adminPort: number | undefined;
  readonly operatorApi: boolean;
  /** `off`, or the variables the change feed's tokens come from (docs/operations.md#the-change-feed). */
  readonly invalidateTokens: string;
  readonly upstream: string;
  readonly store: string;
  readonly keys: string;
  /** `off`, or where spans are exported (docs/operations.md#tracing). */
  readonly tracing: string;
}

export interface StartFactsInput {
  readonly env: EnvConfig;
  /** The raw environment: which variable a public key came from. */
  readonly rawEnv: Readonly<Record<string, string | undefined>>;
  readonly port: number;
  readonly adminPort: number | undefined;
  /** The upstream in use: the embedded sandbox's address, or `UPSTREAM_URL`. */
  readonly upstreamUrl: string;
  readonly embeddedSandbox: boolean;
  /** The store the app built (`app.store.kind`). */
  readonly storeKind: 'memory' | 'redis';
}

/** Scheme, host, port and path: never userinfo, query or fragment. */
function withoutCredentials(address: string): string {
  const url = new URL(address);
  return `${url.origin}${url.pathname === '/' ? '' : url.pathname}`;
}

function describeStore(input: StartFactsInput): string {
  if (input.storeKind === 'memory') return 'in-process (one replica)';
  const nodes = input.env.redisClusterNodes ?? [];
  // The app's own precedence (src/platform/redis/connection.ts): cluster nodes first.
  if (nodes.length > 0) return `Redis Cluster (seed nodes ${nodes.join(', ')})`;
  if (input.env.redisUrl === undefined) return 'Redis';
  const url = new URL(input.env.redisUrl);
  const database = url.pathname.replace(/^\//, '') || '0';
  return `Redis at ${url.hostname}:${url.port || '6379'} (database ${database}${url.protocol === 'rediss:' ? ', TLS' : ''})`;
}

function describeKeys(input: StartFactsInput): string {
  const source = input.env.keySource;
  const algorithms = input.env.jwtAlgorithms === undefined ? '' : ` (${input.env.jwtAlgorithms.join(', ')})`;
  if (source === undefined) return 'the development secret (HS256; embedded default only)';
  switch (source.kind) {
    case 'jwks':
      return `JWKS at ${withoutCredentials(source.url)}${algorithms}`;
    case 'secret':
      return `JWT_SECRET (HMAC)${algorithms}`;
    case 'public-key': {
      const file = input.rawEnv.JWT_PUBLIC_KEY_FILE;
      return `${file !== undefined && file.trim() !== '' ? `JWT_PUBLIC_KEY_FILE (${file})` : 'JWT_PUBLIC_KEY'}${algorithms}`;
    }
  }
}

function describeTracing(input: StartFactsInput): string {
  const tracing = input.env.tracing;
  if (tracing === undefined) return 'off';
  const ratio = tracing.sampler.endsWith('traceidratio') ? ` ${String(tracing.samplerRatio)}` : '';
  return `OTLP/HTTP to ${withoutCredentials(tracing.endpoint)} (service ${tracing.serviceName}, sampler ${tracing.sampler}${ratio})`;
}

/** Where the change feed's tokens come from: the variable's name, and the file's; never a token. */
function describeInvalidateTokens(env: EnvConfig): string {
  const sources = [
    ...(env.invalidateToken === undefined ? [] : ['INVALIDATE_TOKEN']),
    ...(env.invalidateTokenFile === undefined ? [] : [`INVALIDATE_TOKEN_FILE (${env.invalidateTokenFile})`]),
  ];
  return sources.length === 0 ? 'off' : sources.join(', ');
}

export function startFacts(input: StartFactsInput): StartFacts {
  const host = input.env.host === '0.0.0.0' || input.env.host === '::' ? '127.0.0.1' : input.env.host;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${input.port}`,
    port: input.port,
    adminPort: input.adminPort,
    operatorApi: input.env.adminToken !== undefined,
    invalidateTokens: describeInvalidateTokens(input.env),
    upstream: input.embeddedSandbox
      ? `the embedded sandbox at ${input.upstreamUrl}`
      : withoutCredentials(input.upstreamUrl),
    store: describeStore(input),
    keys: describeKeys(input),
    tracing: describeTracing(input),
  };
}

/** The text banner of the embedded default. */
export function bannerLines(facts: StartFacts): string[] {
  const admin =
    facts.adminPort === undefined
      ? 'no admin port'
      : `admin on port ${facts.adminPort}, operator API ${facts.operatorApi ? 'on' : 'off (set ADMIN_TOKEN)'}${
          facts.invalidateTokens === 'off' ? '' : `, invalidations also with ${facts.invalidateTokens}`
        }`;
  return [
    `slab-ops-proxy listening on ${facts.url} (${admin})`,
    `  upstream:    ${facts.upstream}`,
    `  cache store: ${facts.store}`,
    `  token keys:  ${facts.keys}`,
    `  tracing:     ${facts.tracing}`,
  ];
}
