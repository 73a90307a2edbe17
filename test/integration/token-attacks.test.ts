/**
 * The attack list of docs/architecture.md#jose and docs/credentials.md, through the real proxy over HTTP: every token
 * the proxy must refuse is refused with the contract's status, code and headers, and never reaches
 * the upstream; the near-misses that must pass (tolerance, string and number tenants, lowercase
 * scheme) do pass.
 */
import { generateKeyPairSync, type KeyObject, randomUUID } from 'node:crypto';
import { type JWTPayload, jwtVerify, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { KeySourceOptions } from '../../src/auth/key-source.js';
import { ALL_PERMISSIONS, API_PREFIX } from '../../src/catalog/resources.js';
import { DEV_SECRET } from '../../src/cli/dev-credentials.js';
import type { OperatorControl } from '../../src/control/operator-control.js';
import { startStack } from '../helpers/env.js';
import { getWithToken, type RawResponse, type SendOptions, send } from '../helpers/http.js';
import { b64url, token } from '../helpers/tokens.js';

type Stack = Awaited<ReturnType<typeof startStack>>;

interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly code: string;
  readonly request_id: string;
  readonly reason?: string;
  readonly missing?: readonly string[];
}

const LIST = `${API_PREFIX}/receipts?per_page=2`;
const DEV_KEY = new TextEncoder().encode(DEV_SECRET);
const BASE64URL_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_';

function nowSeconds(): number {
  return Math.floor(Date.now() / 1000);
}

/** A complete, valid claim set; tests change one thing at a time. */
function claims(overrides: Record<string, unknown> = {}): JWTPayload {
  const now = nowSeconds();
  return {
    company_id: 1,
    permissions: [...ALL_PERMISSIONS],
    sub: 'attack-suite',
    jti: randomUUID(),
    iat: now,
    exp: now + 600,
    ...overrides,
  };
}

function withoutClaim(name: string): JWTPayload {
  const payload: Record<string, unknown> = { ...claims() };
  delete payload[name];
  return payload;
}

function signHs256(payload: JWTPayload, key: Uint8Array = DEV_KEY): Promise<string> {
  return new SignJWT(payload).setProtectedHeader({ alg: 'HS256', typ: 'JWT' }).sign(key);
}

function segments(jwt: string): [string, string, string] {
  const parts = jwt.split('.');
  expect(parts).toHaveLength(3);
  return parts as [string, string, string];
}

function problemOf(res: RawResponse): Problem {
  expect(res.headers['content-type']).toBe('application/problem+json');
  const body = res.json() as Problem;
  expect(body.status).toBe(res.status);
  expect(body.request_id).toBe(res.headers['x-request-id']);
  return body;
}

/** What every 401 must look like (docs/clients.md#response-headers, RFC 6750 §3.1). */
function expectUnauthenticated(
  res: RawResponse,
  sent: { readonly challenge: 'invalid_token' | 'no_error' | 'any'; readonly token?: string },
): void {
  expect(res.status).toBe(401);
  const challenge = res.headers['www-authenticate'] ?? '';
  expect(challenge).toMatch(/^Bearer\b/);
  if (sent.challenge === 'invalid_token') expect(challenge).toContain('error="invalid_token"');
  if (sent.challenge === 'no_error') expect(challenge).not.toContain('error=');
  expect(res.headers['cache-control']).toBe('no-store');
  expect(problemOf(res).code).toBe('unauthenticated');
  if (sent.token !== undefined && sent.token.length > 0) {
    expect(res.text).not.toContain(sent.token);
    const signature = sent.token.split('.')[2];
    if (signature !== undefined && signature.length >= 8) expect(res.text).not.toContain(signature);
  }
}

/** Runs a request that the proxy must answer itself, and checks that the upstream never saw it. */
async function refused(stack: Stack, request: () => Promise<RawResponse>): Promise<RawResponse> {
  const before = stack.sandbox.stats().served;
  const res = await request();
  expect(stack.sandbox.stats().served).toBe(before);
  return res;
}

async function expectTokenRefused(stack: Stack, jwt: string, target = LIST): Promise<void> {
  const res = await refused(stack, () => getWithToken(stack.proxy.url, target, jwt));
  expectUnauthenticated(res, { challenge: 'invalid_token', token: jwt });
}

async function expectTokenAccepted(stack: Stack, jwt: string, options: SendOptions = {}): Promise<RawResponse> {
  const res = await getWithToken(stack.proxy.url, LIST, jwt, options);
  expect(res.status).toBe(200);
  return res;
}

/** Re-spells the last character of a base64url segment with non-zero unused bits. */
function withDirtyTrailingBits(segment: string): string {
  const unusedBits = (segment.length * 6) % 8;
  expect(unusedBits).toBeGreaterThan(0);
  const last = segment.at(-1) ?? '';
  const index = BASE64URL_ALPHABET.indexOf(last);
  expect(index % (1 << unusedBits)).toBe(0);
  return segment.slice(0, -1) + BASE64URL_ALPHABET.charAt(index + 1);
}

describe('token attacks against the proxy with the development HS256 secret', () => {
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('accepts a well-formed token (the baseline every refusal below differs from by one thing)', async () => {
    await expectTokenAccepted(stack, await signHs256(claims()));
  });

  describe('missing and malformed credentials', () => {
    it('answers 401 without an error code when no credentials are sent', async () => {
      const res = await refused(stack, () => send(stack.proxy.url, LIST));
      expectUnauthenticated(res, { challenge: 'no_error' });
    });

    it('answers 401 without an error code for a non-Bearer scheme (RFC 6750 §3.1: unsupported method)', async () => {
      const res = await refused(stack, () =>
        send(stack.proxy.url, LIST, { headers: [['Authorization', 'Basic dXNlcjpwYXNzd29yZA==']] }),
      );
      expectUnauthenticated(res, { challenge: 'no_error' });
    });

    it('answers 401 for the Bearer scheme without a token', async () => {
      const res = await refused(stack, () => send(stack.proxy.url, LIST, { headers: [['Authorization', 'Bearer']] }));
      expectUnauthenticated(res, { challenge: 'any' });
      const spaced = await refused(stack, () =>
        send(stack.proxy.url, LIST, { headers: [['Authorization', 'Bearer    ']] }),
      );
      expectUnauthenticated(spaced, { challenge: 'any' });
    });

    it.each([
      ['two segments', (jwt: string) => jwt.split('.').slice(0, 2).join('.')],
      ['four segments', (jwt: string) => `${jwt}.${segments(jwt)[2]}`],
      ['garbage', () => 'not-a-jwt-at-all'],
      ['an empty signature segment', (jwt: string) => `${segments(jwt)[0]}.${segments(jwt)[1]}.`],
      [
        'a header that is not JSON',
        (jwt: string) => `${b64url('{"alg":"HS256"')}.${segments(jwt)[1]}.${segments(jwt)[2]}`,
      ],
      [
        'a payload that is not JSON',
        (jwt: string) => `${segments(jwt)[0]}.${b64url('company_id=1')}.${segments(jwt)[2]}`,
      ],
    ])('answers 401 to a malformed token: %s', async (_label, mangle) => {
      await expectTokenRefused(stack, mangle(await signHs256(claims())));
    });

    it('answers 401 to a token over 8 KiB, before any crypto', async () => {
      const big = await signHs256(claims({ padding: 'x'.repeat(9 * 1024) }));
      expect(big.length).toBeGreaterThan(8 * 1024);
      await expectTokenRefused(stack, big);
    });
  });

  describe('algorithm attacks', () => {
    it.each([
      ['alg none, empty signature', 'none', 'empty'],
      ['alg none, a real HS256 signature kept', 'none', 'kept'],
      ['alg NONE, a real HS256 signature kept', 'NONE', 'kept'],
      ['alg None, empty signature', 'None', 'empty'],
    ])('answers 401 to an unsigned token: %s', async (_label, alg, signature) => {
      const signed = segments(await signHs256(claims()));
      const forged = `${b64url(JSON.stringify({ alg, typ: 'JWT' }))}.${signed[1]}.${signature === 'kept' ? signed[2] : ''}`;
      await expectTokenRefused(stack, forged);
    });

    it('answers 401 to a token signed with another secret', async () => {
      await expectTokenRefused(
        stack,
        await signHs256(claims(), new TextEncoder().encode('another secret that is long enough!!')),
      );
    });

    it('answers 401 to a token whose signature has one character changed', async () => {
      const [header, payload, signature] = segments(await signHs256(claims()));
      const at = 10;
      const flipped = signature.charAt(at) === 'A' ? 'B' : 'A';
      await expectTokenRefused(
        stack,
        `${header}.${payload}.${signature.slice(0, at)}${flipped}${signature.slice(at + 1)}`,
      );
    });

    it('answers 401 to a token whose claims were changed after signing (another company)', async () => {
      const [header, , signature] = segments(await signHs256(claims()));
      await expectTokenRefused(stack, `${header}.${b64url(JSON.stringify(claims({ company_id: 2 })))}.${signature}`);
    });
  });

  describe('time claims', () => {
    it('answers 401 to a token expired beyond the 30 s tolerance', async () => {
      const now = nowSeconds();
      await expectTokenRefused(stack, await signHs256(claims({ iat: now - 3600, exp: now - 90 })));
    });

    it('accepts a token expired less than the 30 s tolerance ago', async () => {
      const now = nowSeconds();
      await expectTokenAccepted(stack, await signHs256(claims({ iat: now - 3600, exp: now - 10 })));
    });

    it('answers 401 to a token without exp', async () => {
      await expectTokenRefused(stack, await signHs256(withoutClaim('exp')));
    });

    it('answers 401 to a token whose nbf is in the future beyond the tolerance', async () => {
      await expectTokenRefused(stack, await signHs256(claims({ nbf: nowSeconds() + 300 })));
    });

    it('accepts a token whose nbf is in the future within the tolerance', async () => {
      await expectTokenAccepted(stack, await signHs256(claims({ nbf: nowSeconds() + 10 })));
    });

    it('answers 401 to a token issued far in the future (iat)', async () => {
      const now = nowSeconds();
      await expectTokenRefused(stack, await signHs256(claims({ iat: now + 3600, exp: now + 7200 })));
    });

    it('accepts a token whose iat is ahead by less than the tolerance (clock skew)', async () => {
      await expectTokenAccepted(stack, await signHs256(claims({ iat: nowSeconds() + 10 })));
    });
  });

  describe('non-canonical base64url', () => {
    it('answers 401 when the signature carries = padding', async () => {
      const jwt = await signHs256(claims());
      expect(segments(jwt)[2].length % 4).not.toBe(0);
      await expectTokenRefused(stack, `${jwt}=`);
    });

    it('answers 401 when a middle segment carries = padding', async () => {
      const [header, payload, signature] = segments(await signHs256(claims()));
      await expectTokenRefused(stack, `${header}.${payload}=.${signature}`);
    });

    it('answers 401 to the standard-base64 spelling (+ and /) of a valid token', async () => {
      let jwt = await signHs256(claims());
      for (let i = 0; i < 200 && !/[-_]/.test(jwt); i += 1) jwt = await signHs256(claims());
      expect(jwt).toMatch(/[-_]/);
      const standard = jwt.replaceAll('-', '+').replaceAll('_', '/');
      await expectTokenRefused(stack, standard);
    });

    it('answers 401 to a signature whose last character has non-zero trailing bits, which jose alone accepts', async () => {
      const jwt = await signHs256(claims());
      const [header, payload, signature] = segments(jwt);
      const dirty = withDirtyTrailingBits(signature);
      expect(dirty).not.toBe(signature);
      expect(Buffer.from(dirty, 'base64url').equals(Buffer.from(signature, 'base64url'))).toBe(true);
      const respelled = `${header}.${payload}.${dirty}`;
      // The premise: jose on its own verifies this second spelling of the same signature.
      await expect(jwtVerify(respelled, DEV_KEY, { algorithms: ['HS256'] })).resolves.toBeDefined();
      await expectTokenRefused(stack, respelled);
    });
  });

  describe('claim types', () => {
    it.each<[string, JWTPayload]>([
      ['company_id 1.5', claims({ company_id: 1.5 })],
      ['company_id 0', claims({ company_id: 0 })],
      ['company_id -3', claims({ company_id: -3 })],
      ['company_id true', claims({ company_id: true })],
      ['company_id []', claims({ company_id: [] })],
      ['company_id null', claims({ company_id: null })],
      ['company_id "a b"', claims({ company_id: 'a b' })],
      ['company_id ""', claims({ company_id: '' })],
      ['company_id of 65 characters', claims({ company_id: 'a'.repeat(65) })],
      ['company_id 2^53', claims({ company_id: 2 ** 53 })],
      ['no company_id', withoutClaim('company_id')],
      ['permissions as a string', claims({ permissions: 'view_slab view_slab_logistics' })],
      ['permissions containing a number', claims({ permissions: [...ALL_PERMISSIONS, 1] })],
      ['permissions containing an empty string', claims({ permissions: [...ALL_PERMISSIONS, ''] })],
      ['no permissions', withoutClaim('permissions')],
      ['employee_id without employee_permissions', claims({ employee_id: 7 })],
      ['employee_id 0', claims({ employee_id: 0, employee_permissions: [...ALL_PERMISSIONS] })],
      ['employee_permissions as a string', claims({ employee_id: 7, employee_permissions: 'view_slab' })],
      ['scope as a number', claims({ scope: 42 })],
      ['modules as a string list with a number', claims({ modules: ['slab', 3] })],
      ['sub as a number', claims({ sub: 12 })],
    ])('answers 401 to a token with %s', async (_label, payload) => {
      await expectTokenRefused(stack, await signHs256(payload));
    });

    it.each<[string, unknown]>([
      ['the string "1"', '1'],
      ['the number 1', 1],
      ['a 64-character text tenant', 'a'.repeat(64)],
    ])('accepts company_id as %s', async (_label, company) => {
      await expectTokenAccepted(stack, await signHs256(claims({ company_id: company })));
    });

    it('serves the same tenant for company_id "1" and 1', async () => {
      const asText = await expectTokenAccepted(stack, await signHs256(claims({ company_id: '1' })));
      const asNumber = await expectTokenAccepted(stack, await signHs256(claims({ company_id: 1 })));
      expect(asText.body.equals(asNumber.body)).toBe(true);
    });
  });

  describe('how the token is presented', () => {
    it('accepts the scheme in any case', async () => {
      const jwt = await token();
      for (const scheme of ['bearer', 'BEARER', 'bEaReR']) {
        const res = await send(stack.proxy.url, LIST, { headers: [['Authorization', `${scheme} ${jwt}`]] });
        expect(res.status).toBe(200);
      }
    });

    it('answers 400 invalid_request to two Authorization headers, even when both are valid', async () => {
      const first = await token();
      const second = await token({ company: 2 });
      const res = await refused(stack, () =>
        send(stack.proxy.url, LIST, {
          headers: [
            ['Authorization', `Bearer ${first}`],
            ['Authorization', `Bearer ${second}`],
          ],
        }),
      );
      expect(res.status).toBe(400);
      expect(res.headers['cache-control']).toBe('no-store');
      expect(problemOf(res).code).toBe('invalid_request');
      expect(res.text).not.toContain(first);
      expect(res.text).not.toContain(second);
    });

    it('answers 400 invalid_request to access_token in the query, with or without a header', async () => {
      const jwt = await token();
      const withHeader = await refused(stack, () => getWithToken(stack.proxy.url, `${LIST}&access_token=${jwt}`, jwt));
      expect(withHeader.status).toBe(400);
      expect(problemOf(withHeader).code).toBe('invalid_request');
      expect(withHeader.text).not.toContain(jwt);
      const queryOnly = await refused(stack, () => send(stack.proxy.url, `${API_PREFIX}/receipts?access_token=${jwt}`));
      expect(queryOnly.status).toBe(400);
      expect(problemOf(queryOnly).code).toBe('invalid_request');
      expect(queryOnly.text).not.toContain(jwt);
    });

    it("echoes the client's X-Request-Id in a 401 body and header", async () => {
      const res = await refused(stack, () =>
        send(stack.proxy.url, LIST, { headers: [['X-Request-Id', 'attack-suite-req-1']] }),
      );
      expectUnauthenticated(res, { challenge: 'no_error' });
      expect(res.headers['x-request-id']).toBe('attack-suite-req-1');
      expect(problemOf(res).request_id).toBe('attack-suite-req-1');
    });
  });

  describe('revocations and blocks', () => {
    const control = (): OperatorControl => stack.proxy.app.control;

    it('answers 401 to a token whose jti is revoked, even after it was verified and cached', async () => {
      const jti = randomUUID();
      const exp = nowSeconds() + 600;
      const jwt = await signHs256(claims({ jti, exp, sub: `sub-${jti}` }));
      await expectTokenAccepted(stack, jwt);
      await control().revoke('jti', jti, exp);
      await expectTokenRefused(stack, jwt);
      // Another token of the same credential with another jti is not affected.
      await expectTokenAccepted(stack, await signHs256(claims({ sub: `sub-${jti}` })));
    });

    it('answers 401 to every token of a revoked subject', async () => {
      const sub = `revoked-${randomUUID()}`;
      const jwt = await signHs256(claims({ sub }));
      await expectTokenAccepted(stack, jwt);
      await control().revoke('sub', sub);
      await expectTokenRefused(stack, jwt);
      await expectTokenRefused(stack, await signHs256(claims({ sub })));
    });

    it('answers 403 company while the company is blocked', async () => {
      const jwt = await token();
      await control().blockCompany('1', true);
      try {
        const res = await refused(stack, () => getWithToken(stack.proxy.url, LIST, jwt));
        expect(res.status).toBe(403);
        expect(res.headers['cache-control']).toBe('no-store');
        const body = problemOf(res);
        expect(body.code).toBe('forbidden');
        expect(body.reason).toBe('company');
        // The block names the canonical tenant: the string spelling is blocked too.
        const asText = await refused(stack, async () =>
          getWithToken(stack.proxy.url, LIST, await signHs256(claims({ company_id: '1' }))),
        );
        expect(asText.status).toBe(403);
        expect(problemOf(asText).reason).toBe('company');
      } finally {
        await control().blockCompany('1', false);
      }
      await expectTokenAccepted(stack, jwt);
    });

    it('answers 403 employee while the employee is blocked', async () => {
      const jwt = await token({ employee: 7, employeePermissions: ALL_PERMISSIONS });
      await expectTokenAccepted(stack, jwt);
      await control().blockEmployee('1', '7', true);
      try {
        const res = await refused(stack, () => getWithToken(stack.proxy.url, LIST, jwt));
        expect(res.status).toBe(403);
        const body = problemOf(res);
        expect(body.code).toBe('forbidden');
        expect(body.reason).toBe('employee');
        // The credential alone, without that employee, is not blocked.
        await expectTokenAccepted(stack, await token());
      } finally {
        await control().blockEmployee('1', '7', false);
      }
    });
  });
});

describe('token attacks against the proxy configured with an RSA public key', () => {
  let stack: Stack;
  let pem: string;
  let privateKey: KeyObject;
  beforeAll(async () => {
    const pair = generateKeyPairSync('rsa', { modulusLength: 2048 });
    privateKey = pair.privateKey;
    pem = pair.publicKey.export({ type: 'spki', format: 'pem' }).toString();
    const keys: KeySourceOptions = { kind: 'public-key', key: pem };
    stack = await startStack({ keys }, { keys });
  });
  afterAll(() => stack.close());

  it('accepts an RS256 token with a valid signature', async () => {
    const jwt = await new SignJWT(claims()).setProtectedHeader({ alg: 'RS256', typ: 'JWT' }).sign(privateKey);
    await expectTokenAccepted(stack, jwt);
  });

  it('answers 401 to an RS256 token signed by another key', async () => {
    const other = generateKeyPairSync('rsa', { modulusLength: 2048 }).privateKey;
    await expectTokenRefused(
      stack,
      await new SignJWT(claims()).setProtectedHeader({ alg: 'RS256', typ: 'JWT' }).sign(other),
    );
  });

  it.each([
    ['the PEM as published', () => new TextEncoder().encode(pem)],
    ['the PEM trimmed', () => new TextEncoder().encode(pem.trim())],
  ])('answers 401 to HS256 signed with the public key as the HMAC secret: %s', async (_label, secret) => {
    await expectTokenRefused(stack, await signHs256(claims(), secret()));
  });

  it('answers 401 to a development HS256 token', async () => {
    await expectTokenRefused(stack, await token());
  });

  it('answers 401 to alg none', async () => {
    const body = b64url(JSON.stringify(claims()));
    await expectTokenRefused(stack, `${b64url(JSON.stringify({ alg: 'none', typ: 'JWT' }))}.${body}.`);
  });
});

describe('issuer and audience checks', () => {
  const issuer = 'https://issuer.example.test';
  const audience = 'slab-ops-proxy';
  let stack: Stack;
  beforeAll(async () => {
    stack = await startStack({ issuer, audience });
  });
  afterAll(() => stack.close());

  it('accepts the configured issuer and audience', async () => {
    await expectTokenAccepted(stack, await signHs256(claims({ iss: issuer, aud: audience })));
    await expectTokenAccepted(stack, await signHs256(claims({ iss: issuer, aud: ['someone-else', audience] })));
  });

  it.each<[string, JWTPayload]>([
    ['a wrong issuer', claims({ iss: 'https://evil.example.test', aud: audience })],
    ['a wrong audience', claims({ iss: issuer, aud: 'another-service' })],
    ['no issuer', claims({ aud: audience })],
    ['no audience', claims({ iss: issuer })],
    ['an issuer that only starts like the right one', claims({ iss: `${issuer}.evil`, aud: audience })],
  ])('answers 401 to %s', async (_label, payload) => {
    await expectTokenRefused(stack, await signHs256(payload));
  });
});
