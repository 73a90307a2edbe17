/**
 * Remote JWKS (docs/credentials.md): keys fetched from a JWKS endpoint, refetched on an unknown `kid` (after
 * the cooldown), kept usable while the endpoint is down (a failed refresh keeps the known set), and
 * never a way in for HS* tokens. A tiny JWKS server on port 0 plays the identity provider; the
 * sandbox upstream gets its own JWKS server with the same keys, so that taking the proxy's endpoint
 * down does not take the upstream's with it. The factory's refusals are tested directly at the end.
 */
import { generateKeyPairSync, type KeyObject, randomUUID } from 'node:crypto';
import { subscribe, unsubscribe } from 'node:diagnostics_channel';
import { EventEmitter, once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, type JWK, type JWTPayload, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createVerificationKey, KeySourceError, type KeySourceOptions } from '../../src/auth/key-source.js';
import { ALL_PERMISSIONS, API_PREFIX } from '../../src/catalog/resources.js';
import { DEV_SECRET } from '../../src/cli/dev-credentials.js';
import { startStack } from '../helpers/env.js';
import { getWithToken, type RawResponse } from '../helpers/http.js';

type Stack = Awaited<ReturnType<typeof startStack>>;
interface Signer {
  readonly kid: string;
  readonly privateKey: KeyObject;
  readonly jwk: JWK;
}

const LIST = `${API_PREFIX}/receipts?per_page=2`;
/** The longest wait for an expected JWKS fetch: a bound on failure, not a sleep. */
const WAIT_LIMIT_MS = 5_000;

/** An ES256 signing key and its public JWK (with `kid`, `alg`, `use`), as an IdP publishes it. */
async function newSigner(kid: string): Promise<Signer> {
  const { publicKey, privateKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
  const jwk = { ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' };
  return { kid, privateKey, jwk };
}

function claims(): JWTPayload {
  const now = Math.floor(Date.now() / 1000);
  // A fresh jti every time: a new token, so the proxy's verified-token cache cannot answer for it.
  return {
    company_id: 1,
    permissions: [...ALL_PERMISSIONS],
    sub: 'jwks-suite',
    jti: randomUUID(),
    iat: now,
    exp: now + 600,
  };
}

function signWith(signer: Signer): Promise<string> {
  return new SignJWT(claims())
    .setProtectedHeader({ alg: 'ES256', typ: 'JWT', kid: signer.kid })
    .sign(signer.privateKey);
}

/**
 * A JWKS endpoint: serves the current key list, counts every request it receives (and emits
 * `request` for each), and can be made to fail (503) or be closed and reopened on its port.
 */
class JwksServer extends EventEmitter {
  keys: JWK[] = [];
  failing = false;
  requests = 0;
  #server: Server | undefined;
  #port = 0;

  async start(port = 0): Promise<void> {
    const server = createServer((_req, res) => {
      this.requests += 1;
      this.emit('request', this.requests);
      if (this.failing) {
        res.writeHead(503, { 'content-type': 'text/plain' });
        res.end('down for maintenance');
        return;
      }
      const body = JSON.stringify({ keys: this.keys });
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
      res.end(body);
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
    });
    this.#server = server;
    this.#port = (server.address() as AddressInfo).port;
  }

  get port(): number {
    return this.#port;
  }

  get url(): string {
    return `http://127.0.0.1:${this.#port}/.well-known/jwks.json`;
  }

  /** Resolves once `count` more requests have arrived (no polling, no sleeping); fails after 5 s. */
  async nextRequests(count: number): Promise<void> {
    const target = this.requests + count;
    const signal = AbortSignal.timeout(WAIT_LIMIT_MS);
    while (this.requests < target) await once(this, 'request', { signal });
  }

  async stop(): Promise<void> {
    const server = this.#server;
    this.#server = undefined;
    if (server === undefined) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }
}

/**
 * Resolves after `count` failed connection attempts to `port` (Node's fetch reports them on the
 * `undici:client:connectError` diagnostics channel): the way to see a refresh attempt against an
 * endpoint that is not listening at all.
 */
function connectErrors(port: number, count: number): Promise<void> {
  return new Promise((resolve, reject) => {
    let seen = 0;
    const giveUp = setTimeout(() => {
      unsubscribe('undici:client:connectError', onError);
      reject(new Error(`saw ${seen} of ${count} connection attempts to port ${port}`));
    }, WAIT_LIMIT_MS);
    const onError = (message: unknown): void => {
      if (typeof message !== 'object' || message === null || !('connectParams' in message)) return;
      const params = message.connectParams;
      if (typeof params !== 'object' || params === null || !('port' in params) || String(params.port) !== String(port))
        return;
      seen += 1;
      if (seen >= count) {
        clearTimeout(giveUp);
        unsubscribe('undici:client:connectError', onError);
        resolve();
      }
    };
    subscribe('undici:client:connectError', onError);
  });
}

function problemCode(res: RawResponse): string {
  expect(res.headers['content-type']).toBe('application/problem+json');
  return (res.json() as { code: string }).code;
}

async function expectAccepted(stack: Stack, jwt: string): Promise<void> {
  const res = await getWithToken(stack.proxy.url, LIST, jwt);
  expect(res.status).toBe(200);
}

async function expectRefused(stack: Stack, jwt: string): Promise<void> {
  const before = stack.sandbox.stats().served;
  const res = await getWithToken(stack.proxy.url, LIST, jwt);
  expect(res.status).toBe(401);
  expect(problemCode(res)).toBe('unauthenticated');
  expect(res.headers['www-authenticate']).toContain('error="invalid_token"');
  expect(stack.sandbox.stats().served).toBe(before);
}

/** Two endpoints with one key list: the proxy's (the subject) and the sandbox's (always up). */
async function startIdentityProvider(): Promise<{
  proxyJwks: JwksServer;
  upstreamJwks: JwksServer;
  publish(signer: Signer): void;
}> {
  const proxyJwks = new JwksServer();
  const upstreamJwks = new JwksServer();
  await proxyJwks.start();
  await upstreamJwks.start();
  return {
    proxyJwks,
    upstreamJwks,
    publish(signer) {
      proxyJwks.keys = [...proxyJwks.keys, signer.jwk];
      upstreamJwks.keys = [...upstreamJwks.keys, signer.jwk];
    },
  };
}

describe('a remote JWKS: known keys and rotation', () => {
  let stack: Stack;
  let idp: Awaited<ReturnType<typeof startIdentityProvider>>;
  let first: Signer;
  beforeAll(async () => {
    idp = await startIdentityProvider();
    first = await newSigner('key-2026-01');
    idp.publish(first);
    // The background refresh is far away here, so every fetch seen is one the proxy chose to make.
    const proxyKeys: KeySourceOptions = { kind: 'jwks', url: idp.proxyJwks.url, cooldownMs: 0, refreshMs: 600_000 };
    const upstreamKeys: KeySourceOptions = { kind: 'jwks', url: idp.upstreamJwks.url, cooldownMs: 0 };
    stack = await startStack({ keys: proxyKeys }, { keys: upstreamKeys });
  });
  afterAll(async () => {
    await stack.close();
    await idp.proxyJwks.stop();
    await idp.upstreamJwks.stop();
  });

  it('accepts a token signed with a published key', async () => {
    await expectAccepted(stack, await signWith(first));
    expect(idp.proxyJwks.requests).toBeGreaterThanOrEqual(1);
  });

  it('uses the cached set for further tokens of a known kid', async () => {
    const before = idp.proxyJwks.requests;
    await expectAccepted(stack, await signWith(first));
    await expectAccepted(stack, await signWith(first));
    expect(idp.proxyJwks.requests).toBe(before);
  });

  it('refetches the set on an unknown kid and accepts a rotated key', async () => {
    const second = await newSigner('key-2026-02');
    idp.publish(second);
    const before = idp.proxyJwks.requests;
    await expectAccepted(stack, await signWith(second));
    expect(idp.proxyJwks.requests).toBe(before + 1);
    // The old key stays valid while it is still published.
    await expectAccepted(stack, await signWith(first));
  });

  it('answers 401 to a kid that the endpoint does not publish', async () => {
    const stranger = await newSigner('key-never-published');
    await expectRefused(stack, await signWith(stranger));
  });

  it('answers 401 to a token signed by an unpublished key that claims a published kid', async () => {
    const impostor = await newSigner(first.kid);
    await expectRefused(stack, await signWith(impostor));
  });

  it.each([
    ['a kid that matches nothing', 'no-such-kid'],
    ['the kid of a published key', 'key-2026-01'],
  ])('answers 401 to an HS256 token with %s, without fetching the set', async (_label, kid) => {
    const before = idp.proxyJwks.requests;
    for (const secret of [DEV_SECRET, JSON.stringify(first.jwk)]) {
      const jwt = await new SignJWT(claims())
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT', kid })
        .sign(new TextEncoder().encode(secret));
      await expectRefused(stack, jwt);
    }
    expect(idp.proxyJwks.requests).toBe(before);
  });
});

describe('a remote JWKS while the endpoint is down', () => {
  const REFRESH_MS = 40;
  let stack: Stack;
  let idp: Awaited<ReturnType<typeof startIdentityProvider>>;
  let known: Signer;
  beforeAll(async () => {
    idp = await startIdentityProvider();
    known = await newSigner('key-known');
    idp.publish(known);
    const proxyKeys: KeySourceOptions = {
      kind: 'jwks',
      url: idp.proxyJwks.url,
      cooldownMs: 0,
      refreshMs: REFRESH_MS,
      timeoutMs: 1000,
    };
    const upstreamKeys: KeySourceOptions = { kind: 'jwks', url: idp.upstreamJwks.url, cooldownMs: 0 };
    stack = await startStack({ keys: proxyKeys }, { keys: upstreamKeys });
    await expectAccepted(stack, await signWith(known)); // the proxy now knows the set
  });
  afterAll(async () => {
    await stack.close();
    await idp.proxyJwks.stop();
    await idp.upstreamJwks.stop();
  });

  it('refreshes the set in the background, and verifies with the set it fetched', async () => {
    const published = await newSigner('key-published-between-refreshes');
    idp.publish(published);
    // Refreshes run one after another: the second's arrival means the first, which served the
    // new key, has been taken in.
    await idp.proxyJwks.nextRequests(2);
    // With the endpoint failing, no fetch made for the unknown kid could bring it: only the
    // background refresh can have.
    idp.proxyJwks.failing = true;
    try {
      await expectAccepted(stack, await signWith(published));
    } finally {
      idp.proxyJwks.failing = false;
    }
  });

  it('keeps verifying known kids while every refresh fails (503), and refuses unknown kids', async () => {
    idp.proxyJwks.failing = true;
    try {
      await idp.proxyJwks.nextRequests(3); // three failed refreshes: more than one refresh interval
      await expectAccepted(stack, await signWith(known));
      const rotated = await newSigner('key-published-during-outage');
      idp.publish(rotated); // published, but the endpoint cannot serve it
      await expectRefused(stack, await signWith(rotated));
      await idp.proxyJwks.nextRequests(1);
      await expectAccepted(stack, await signWith(known));
    } finally {
      idp.proxyJwks.failing = false;
    }
  });

  it('keeps verifying known kids while the endpoint refuses connections, refuses unknown kids, and recovers', async () => {
    const port = idp.proxyJwks.port;
    await idp.proxyJwks.stop();
    await connectErrors(port, 3); // three refreshes that could not even connect
    await expectAccepted(stack, await signWith(known));

    const rotated = await newSigner('key-published-while-closed');
    idp.publish(rotated);
    await expectRefused(stack, await signWith(rotated));
    await connectErrors(port, 1);
    await expectAccepted(stack, await signWith(known));

    // Back up on the same address: the rotated key is picked up, the known one still works.
    await idp.proxyJwks.start(port);
    await expectAccepted(stack, await signWith(rotated));
    await expectAccepted(stack, await signWith(known));
  });
});

describe('createVerificationKey refuses unsafe or impossible key sources', () => {
  const pems = new Map<string, string>();
  /** One generated public key per type (RSA generation is slow), as SPKI PEM. */
  function pem(type: 'rsa' | 'ec' | 'ed25519'): string {
    const known = pems.get(type);
    if (known !== undefined) return known;
    const pair =
      type === 'rsa'
        ? generateKeyPairSync('rsa', { modulusLength: 2048 })
        : type === 'ec'
          ? generateKeyPairSync('ec', { namedCurve: 'P-256' })
          : generateKeyPairSync('ed25519');
    const text = pair.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    pems.set(type, text);
    return text;
  }

  function refusal(options: KeySourceOptions): KeySourceError {
    try {
      createVerificationKey(options).close();
    } catch (error) {
      expect(error).toBeInstanceOf(KeySourceError);
      if (error instanceof KeySourceError) return error;
    }
    throw new Error('createVerificationKey accepted an unsafe key source');
  }

  it.each(['HS256', 'HS384', 'HS512', 'none'])(
    'refuses JWT_ALGORITHMS %s with a public key, naming JWT_ALGORITHMS',
    (alg) => {
      const error = refusal({ kind: 'public-key', key: pem('rsa'), algorithms: [alg] });
      expect(error.option).toBe('JWT_ALGORITHMS');
      expect(error.message).toContain('JWT_ALGORITHMS');
    },
  );

  it('refuses HS256 mixed into the algorithms of a public key', () => {
    expect(refusal({ kind: 'public-key', key: pem('rsa'), algorithms: ['RS256', 'HS256'] }).option).toBe(
      'JWT_ALGORITHMS',
    );
  });

  it('refuses HS256 for a JWKS URL, naming JWT_ALGORITHMS', () => {
    expect(refusal({ kind: 'jwks', url: 'https://idp.example.test/jwks.json', algorithms: ['HS256'] }).option).toBe(
      'JWT_ALGORITHMS',
    );
  });

  it('refuses an RSA algorithm for an EC key', () => {
    expect(refusal({ kind: 'public-key', key: pem('ec'), algorithms: ['RS256'] }).option).toBe('JWT_ALGORITHMS');
  });

  it('refuses a symmetric JWK (kty oct) as a public key', () => {
    const jwk = JSON.stringify({ kty: 'oct', k: Buffer.from(DEV_SECRET).toString('base64url'), alg: 'HS256' });
    expect(refusal({ kind: 'public-key', key: jwk }).option).toBe('JWT_PUBLIC_KEY');
  });

  it('refuses a public JWK whose alg is HS256', async () => {
    const { publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = JSON.stringify({ ...(await exportJWK(publicKey)), alg: 'HS256' });
    expect(refusal({ kind: 'public-key', key: jwk }).option).toBe('JWT_PUBLIC_KEY');
  });

  it('refuses text that is neither a PEM nor a JWK', () => {
    expect(refusal({ kind: 'public-key', key: 'not a key' }).option).toBe('JWT_PUBLIC_KEY');
  });

  it.each([
    ['HS256', 31],
    ['HS384', 47],
    ['HS512', 63],
  ])('refuses a secret too short for %s, naming JWT_SECRET', (alg, length) => {
    const error = refusal({ kind: 'secret', secret: 's'.repeat(length), algorithms: [alg] });
    expect(error.option).toBe('JWT_SECRET');
    expect(error.message).toContain('JWT_SECRET');
  });

  it('refuses a short secret with the default algorithm, and RS256 for a secret', () => {
    expect(refusal({ kind: 'secret', secret: 'short' }).option).toBe('JWT_SECRET');
    expect(refusal({ kind: 'secret', secret: DEV_SECRET, algorithms: ['RS256'] }).option).toBe('JWT_ALGORITHMS');
  });

  it('refuses a JWKS URL that is not http(s)', () => {
    expect(refusal({ kind: 'jwks', url: 'file:///etc/jwks.json' }).option).toBe('JWT_JWKS_URL');
    expect(refusal({ kind: 'jwks', url: 'not a url' }).option).toBe('JWT_JWKS_URL');
  });

  it('pins ES256 for an EC P-256 PEM', () => {
    const key = createVerificationKey({ kind: 'public-key', key: pem('ec') });
    expect(key.algorithms).toEqual(['ES256']);
  });

  it('pins EdDSA for an Ed25519 PEM', () => {
    const key = createVerificationKey({ kind: 'public-key', key: pem('ed25519') });
    expect(key.algorithms).toContain('EdDSA');
    for (const alg of key.algorithms) expect(['EdDSA', 'Ed25519']).toContain(alg);
  });

  it('pins the RSA family, never HMAC or none, for an RSA PEM', () => {
    const key = createVerificationKey({ kind: 'public-key', key: pem('rsa') });
    expect(key.algorithms).toContain('RS256');
    for (const alg of key.algorithms) expect(alg).toMatch(/^(RS|PS)(256|384|512)$/);
  });

  it('pins HS256 for a long enough secret', () => {
    expect(createVerificationKey({ kind: 'secret', secret: DEV_SECRET }).algorithms).toEqual(['HS256']);
  });
});
