/**
 * The canary (docs/operations.md#logs): a run through every error path (each 401
 * reason, 400, 403, 404, 405, 429, 5xx, Redis down) and the pass-through, the admin plane and the
 * fallback, with real tokens put everywhere a careless logger might print them (Authorization,
 * a second Authorization, Proxy-Authorization, Cookie, the query, X-Request-Id, a body). Every
 * request must leave one line with its status and `code`, and the whole captured log, debug lines
 * of the libraries included, must hold no token, no signature and no admin token.
 */
import { once } from 'node:events';
import { Writable } from 'node:stream';
import { SignJWT } from 'jose';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { ALL_PERMISSIONS, API_PREFIX } from '../../src/catalog/resources.js';
import { DEV_SECRET, type DevTokenOptions } from '../../src/cli/dev-credentials.js';
import { createLogger } from '../../src/observability/logger.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { type RawResponse, type SendOptions, send } from '../helpers/http.js';
import { type RedisServer, startRedis } from '../helpers/redis.js';
import { until } from '../helpers/replicas.js';
import { settledOperatorState } from '../helpers/shared-redis.js';
import { token } from '../helpers/tokens.js';
import { freePort } from '../support/free-port.js';

const ISSUER = 'https://issuer.log-redaction.test';
const AUDIENCE = 'slab-ops-proxy-log-redaction';
const ADMIN_TOKEN = 'admin-canary-7f3c9a1e5b2d4c6f8a0b1c2d3e4f5a6b';
const P = API_PREFIX;
const DEV_KEY = new TextEncoder().encode(DEV_SECRET);

/** Every secret sent during the run: none of them may appear in the captured log. */
const secrets = new Set<string>([ADMIN_TOKEN]);

type Line = Record<string, unknown>;

/** Everything every logger of the run wrote, debug lines included. */
const captured: string[] = [];
/** Waiting for a line to be written (`nextLine`). */
const waiters = new Set<{ readonly matches: (line: Line) => boolean; readonly resolve: () => void }>();
const destination = new Writable({
  write(chunk: Buffer, _encoding, callback) {
    const text = chunk.toString('utf8');
    captured.push(text);
    for (const waiter of waiters) {
      if (text.split('\n').some((raw) => raw.length > 0 && waiter.matches(JSON.parse(raw) as Line))) {
        waiters.delete(waiter);
        waiter.resolve();
      }
    }
    callback();
  },
});
const logger = createLogger('debug', destination);

/** Resolves when a line matching `matches` is written from now on. */
function nextLine(matches: (line: Line) => boolean): Promise<void> {
  return new Promise((resolve) => waiters.add({ matches, resolve }));
}

function logText(): string {
  return captured.join('');
}

function logLines(): Line[] {
  return logText()
    .split('\n')
    .filter((line) => line.length > 0)
    .map((line) => JSON.parse(line) as Line);
}

/** Registers a token sent during the run: it and its signature segment must stay out of the log. */
function remember(jwt: string): string {
  secrets.add(jwt);
  return jwt;
}

let minted = 0;
/** A real token the proxy accepts (unless told otherwise), with a subject of its own. */
async function canary(options: Partial<DevTokenOptions> = {}): Promise<string> {
  minted += 1;
  return remember(await token({ issuer: ISSUER, audience: AUDIENCE, subject: `canary-${minted}`, ...options }));
}

/** A hand-built token: for the claims `mintDevToken` cannot spell (expired, not yet valid, no exp). */
/** A token signed by hand; a claim given as `undefined` is left out. */
async function handBuilt(payload: Readonly<Record<string, unknown>>, alg = 'HS256'): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  const claims: Record<string, unknown> = {
    company_id: 1,
    permissions: [...ALL_PERMISSIONS],
    sub: 'canary-hand',
    iss: ISSUER,
    aud: AUDIENCE,
    iat: now,
    exp: now + 600,
    ...payload,
  };
  for (const [name, value] of Object.entries(claims)) if (value === undefined) delete claims[name];
  return remember(await new SignJWT(claims).setProtectedHeader({ alg, typ: 'JWT' }).sign(DEV_KEY));
}

function signatureOf(jwt: string): string {
  return jwt.split('.')[2] ?? '';
}

function expectNoSecretLogged(): void {
  const text = logText();
  for (const secret of secrets) {
    expect(text.includes(secret), `a secret sent during the run is in the log`).toBe(false);
    const signature = signatureOf(secret);
    if (signature.length >= 16) expect(text.includes(signature), `a token signature is in the log`).toBe(false);
  }
  // No header value and no query made it in, whatever it held.
  expect(text).not.toMatch(/bearer /i);
  expect(text).not.toContain('access_token');
  expect(text).not.toContain('session=');
}

let stepCount = 0;

interface Expected {
  readonly status: number;
  /** The problem code of the answer and its line; `null`: an answer that is not the proxy's problem. */
  readonly code: string | null;
  /** The logged path, when it is not the target's path as sent. */
  readonly path?: string;
}

/**
 * Sends one request with an id of its own (unless the test sends its own `X-Request-Id`), checks
 * the answer, and returns the one request line it left. The line is written when the answer is
 * finished, before the connection closes: it is there when `send` resolves.
 */
async function step(
  base: string,
  target: string,
  options: SendOptions,
  expected: Expected,
): Promise<{ res: RawResponse; line: Line }> {
  stepCount += 1;
  const ownId = options.headers?.some(([name]) => name.toLowerCase() === 'x-request-id') === true;
  const sentId = `log-step-${stepCount}`;
  const res = await send(base, target, {
    ...options,
    headers: [...(options.headers ?? []), ...(ownId ? [] : [['X-Request-Id', sentId] as const])],
  });
  expect(res.status).toBe(expected.status);
  if (expected.code !== null && options.method !== 'HEAD')
    expect((res.json() as { code?: string }).code).toBe(expected.code);
  const id = ownId ? res.headers['x-request-id'] : sentId;
  if (!ownId && res.headers['x-request-id'] !== undefined) expect(res.headers['x-request-id']).toBe(sentId);
  expect(id).toBeDefined();
  const lines = logLines().filter((line) => line.req_id === id && 'status' in line);
  expect(lines, `one request line for ${target}`).toHaveLength(1);
  const line = lines[0] ?? {};
  expect(line.status).toBe(expected.status);
  expect(line.code).toBe(expected.code ?? undefined);
  expect(line.method).toBe(options.method ?? 'GET');
  expect(line.path).toBe(expected.path ?? target.split('?')[0]);
  expect(line.level).toBe(30);
  return { res, line };
}

function bearer(jwt: string): readonly [string, string] {
  return ['Authorization', `Bearer ${jwt}`];
}

/** The other places a careless logger prints: cookies, a proxy credential. */
function decoys(jwt: string): ReadonlyArray<readonly [string, string]> {
  return [
    ['Cookie', `session=${jwt}; theme=dark`],
    ['Proxy-Authorization', `Bearer ${jwt}`],
  ];
}

let sandbox: Sandbox;
let redis: RedisServer;
/** Redis, issuer and audience, the admin port; the breaker kept closed so every 5xx is the upstream's. */
let main: ProxyHandle;
/** Two requests per credential a minute. */
let limited: ProxyHandle;
/** `upstream.passthrough: true`. */
let passthrough: ProxyHandle;
/** An admin token that looks like an ordinary path word: only its registration keeps it out. */
let wordy: ProxyHandle;
const WORDY_ADMIN_TOKEN = 'letmein-opensesame';
secrets.add(WORDY_ADMIN_TOKEN);

beforeAll(async () => {
  [sandbox, redis] = await Promise.all([startSandbox(), startRedis()]);
  await settledOperatorState(redis);
  const common = { upstreamUrl: sandbox.url, issuer: ISSUER, audience: AUDIENCE, logger };
  [main, limited, passthrough] = await Promise.all([
    startProxy({
      ...common,
      redisUrl: redis.url,
      adminToken: ADMIN_TOKEN,
      // `budgetCutOff: share`: reads reach the upstream with Redis down, the path with most to log.
      config: { upstream: { timeout: 0.5, breaker: { failures: 1000, openFor: 1 }, budgetCutOff: 'share' } },
    }),
    startProxy({ ...common, config: { rateLimit: { perCredential: { points: 2, duration: 60 } } } }),
    startProxy({ ...common, config: { upstream: { passthrough: true } } }),
  ]);
  wordy = await startProxy({ ...common, adminToken: WORDY_ADMIN_TOKEN });
});

afterEach(() => {
  sandbox.faults.clear();
  expectNoSecretLogged();
});

afterAll(async () => {
  await Promise.all([main?.close(), limited?.close(), passthrough?.close(), wordy?.close()]);
  await sandbox?.close();
  await redis?.stop();
  // Shutdown logs (Redis disconnects) too.
  expectNoSecretLogged();
});

describe('request logs never hold a token', () => {
  it('a served read: the token in Authorization, Cookie, Proxy-Authorization and X-Request-Id', async () => {
    const jwt = await canary();
    const { res, line } = await step(
      main.url,
      `${P}/receipts?per_page=2`,
      { headers: [bearer(jwt), ...decoys(jwt), ['X-Request-Id', jwt]] },
      { status: 200, code: null },
    );
    // The token is not a plausible id: replaced, and the line names the id the client was given.
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(line.req_id).toBe(res.headers['x-request-id']);
    expect(line).toMatchObject({ company: '1', sub: 'canary-1', resource: 'receipts' });
  });

  describe('each 401 reason', () => {
    it('no credentials (the token only in Cookie and X-Request-Id)', async () => {
      const jwt = await canary();
      await step(main.url, `${P}/receipts`, { headers: decoys(jwt) }, { status: 401, code: 'unauthenticated' });
      await step(
        main.url,
        `${P}/receipts`,
        { headers: [['X-Request-Id', `${jwt}`]] },
        { status: 401, code: 'unauthenticated' },
      );
    });

    it('another scheme, and Bearer without a token', async () => {
      const jwt = await canary();
      await step(
        main.url,
        `${P}/receipts`,
        { headers: [['Authorization', `Basic ${jwt}`]] },
        { status: 401, code: 'unauthenticated' },
      );
      await step(
        main.url,
        `${P}/receipts`,
        { headers: [['Authorization', 'Bearer'], ...decoys(jwt)] },
        { status: 401, code: 'unauthenticated' },
      );
    });

    it('malformed: four segments, a bad character, the payload alone', async () => {
      const jwt = await canary();
      for (const mangled of [`${jwt}.${signatureOf(jwt)}`, `${jwt}!`, jwt.split('.').slice(0, 2).join('.')]) {
        remember(mangled);
        await step(main.url, `${P}/receipts`, { headers: [bearer(mangled)] }, { status: 401, code: 'unauthenticated' });
      }
    });

    it('a bad signature (signed with another secret)', async () => {
      const forged = await canary({ secret: 'not the development secret, a forger' });
      await step(
        main.url,
        `${P}/receipts`,
        { headers: [bearer(forged), ...decoys(forged)] },
        { status: 401, code: 'unauthenticated' },
      );
    });

    it('expired, not yet valid, no exp, another algorithm', async () => {
      const now = Math.floor(Date.now() / 1000);
      const refused = [
        await handBuilt({ iat: now - 7200, exp: now - 3600 }),
        await handBuilt({ nbf: now + 3600 }),
        await handBuilt({ exp: undefined }),
        await handBuilt({}, 'HS512'),
      ];
      for (const jwt of refused)
        await step(main.url, `${P}/receipts`, { headers: [bearer(jwt)] }, { status: 401, code: 'unauthenticated' });
    });

    it('wrong issuer, wrong audience', async () => {
      for (const jwt of [
        await canary({ issuer: 'https://someone-else.test' }),
        await canary({ audience: 'another-service' }),
      ]) {
        await step(main.url, `${P}/receipts`, { headers: [bearer(jwt)] }, { status: 401, code: 'unauthenticated' });
      }
    });

    it('revoked (through the admin API, whose token is a secret too)', async () => {
      const jti = `canary-jti-${String(Date.now())}`;
      const jwt = await canary({ tokenId: jti });
      await step(main.url, `${P}/receipts?per_page=4`, { headers: [bearer(jwt)] }, { status: 200, code: null });
      await step(
        main.adminUrl ?? '',
        `/admin/revocations?token=${ADMIN_TOKEN}`,
        {
          method: 'POST',
          headers: [bearer(ADMIN_TOKEN), ['Content-Type', 'application/json'], ['Cookie', `session=${ADMIN_TOKEN}`]],
          body: JSON.stringify({ jti }),
        },
        { status: 201, code: null },
      );
      await until(
        async () => (await send(main.url, `${P}/receipts?per_page=4`, { headers: [bearer(jwt)] })).status === 401,
        'the revocation to apply',
        2_000,
      );
      await step(
        main.url,
        `${P}/receipts?per_page=4`,
        { headers: [bearer(jwt), ...decoys(jwt)] },
        { status: 401, code: 'unauthenticated' },
      );
    });
  });

  it('400: two Authorization headers, the token in the query, a query value', async () => {
    const [first, second] = [await canary(), await canary()];
    await step(
      main.url,
      `${P}/receipts`,
      { headers: [bearer(first), bearer(second)] },
      { status: 400, code: 'invalid_request' },
    );
    await step(
      main.url,
      `${P}/receipts?access_token=${second}`,
      { headers: [bearer(first)] },
      { status: 400, code: 'invalid_request' },
    );
    await step(main.url, `${P}/receipts?access_token=${second}`, {}, { status: 400, code: 'invalid_request' });
    await step(
      main.url,
      `${P}/receipts?per_page=${second}`,
      { headers: [bearer(first)] },
      { status: 400, code: 'invalid_parameter' },
    );
  });

  it('403: a token without the permission', async () => {
    const jwt = await canary({ permissions: [] });
    await step(
      main.url,
      `${P}/receipts`,
      { headers: [bearer(jwt), ...decoys(jwt)] },
      { status: 403, code: 'forbidden' },
    );
  });

  it('404: an unknown resource, a malformed id, an unknown record (the upstream’s), and 405', async () => {
    const jwt = await canary();
    await step(main.url, `${P}/widgets?q=${jwt}`, { headers: [bearer(jwt)] }, { status: 404, code: 'not_found' });
    await step(main.url, `${P}/receipts/not-an-id`, { headers: [bearer(jwt)] }, { status: 404, code: 'not_found' });
    // The upstream's own 404 passes through as it was sent: a status, no code of the proxy's.
    await step(
      main.url,
      `${P}/receipts/987654321987`,
      { headers: [bearer(jwt)] },
      { status: 404, code: null, path: `${P}/receipts/{id}` },
    );
    await step(
      main.url,
      `${P}/receipts`,
      { method: 'DELETE', headers: [bearer(jwt)] },
      { status: 405, code: 'method_not_allowed' },
    );
  });

  it('429: over the per-credential limit', async () => {
    const jwt = await canary();
    for (let i = 0; i < 2; i++)
      await step(limited.url, `${P}/receipts?per_page=5`, { headers: [bearer(jwt)] }, { status: 200, code: null });
    await step(
      limited.url,
      `${P}/receipts?per_page=5`,
      { headers: [bearer(jwt), ...decoys(jwt)] },
      { status: 429, code: 'rate_limited' },
    );
  });

  it('5xx: the upstream failing (502), truncating (502), too slow (504), refusing (503)', async () => {
    const jwt = await canary();
    sandbox.faults.set({ status: 500, times: 1 });
    await step(main.url, `${P}/remnants?per_page=6`, { headers: [bearer(jwt)] }, { status: 502, code: 'bad_gateway' });
    sandbox.faults.set({ body: 'truncated', times: 1 });
    await step(main.url, `${P}/remnants?per_page=7`, { headers: [bearer(jwt)] }, { status: 502, code: 'bad_gateway' });
    sandbox.faults.set({ latencyMs: 2_000, times: 1 });
    await step(
      main.url,
      `${P}/remnants?per_page=8`,
      { headers: [bearer(jwt)] },
      { status: 504, code: 'upstream_timeout' },
    );
    const closed = once(sandbox.server, 'close');
    const back = sandbox.refuse(60_000); // until accept(): no timer to race
    await closed;
    try {
      await step(
        main.url,
        `${P}/remnants?per_page=9`,
        { headers: [bearer(jwt), ...decoys(jwt)] },
        { status: 503, code: 'upstream_unavailable' },
      );
      // The pass-through's own error answer: a problem of the proxy's, logged by the Express plane.
      await step(
        passthrough.url,
        `/elsewhere?access_token=${jwt}`,
        { headers: [bearer(jwt), ...decoys(jwt)] },
        { status: 503, code: 'upstream_unavailable' },
      );
    } finally {
      sandbox.accept();
      await back;
    }
  });

  it('Redis down: reads still served, and the libraries’ debug lines hold no token', async () => {
    const jwt = await canary();
    // The capture sees the debug level: the lost connection is logged, and checked like the rest.
    const connectionLost = nextLine((line) => line.level === 20 && line.msg === 'redis connection error');
    await redis.kill();
    await step(
      main.url,
      `${P}/stocktakes?per_page=3`,
      { headers: [bearer(jwt), ...decoys(jwt)] },
      { status: 200, code: null },
    );
    const forged = await canary({ secret: 'forged while redis is down' });
    await step(
      main.url,
      `${P}/stocktakes?per_page=3`,
      { headers: [bearer(forged)] },
      { status: 401, code: 'unauthenticated' },
    );
    await connectionLost;
  });

  describe('the Express planes', () => {
    it('the fallback: 404 problem for a path outside the API, GET and HEAD', async () => {
      const jwt = await canary();
      const { line } = await step(
        main.url,
        `/elsewhere/x?access_token=${jwt}`,
        { headers: [bearer(jwt), ...decoys(jwt)] },
        { status: 404, code: 'not_found' },
      );
      expect(line.msg).toBe('request');
      expect(typeof line.ms).toBe('number');
      expect(Object.keys(line)).not.toContain('req');
      expect(Object.keys(line)).not.toContain('res');
      await step(
        main.url,
        `/elsewhere?token=${jwt}`,
        { method: 'HEAD', headers: [bearer(jwt)] },
        { status: 404, code: 'not_found' },
      );
    });

    it('the pass-through: whatever the upstream answers, the token in headers, query and body', async () => {
      const jwt = await canary();
      await step(
        passthrough.url,
        `${P}/not-a-resource?access_token=${jwt}`,
        { headers: [bearer(jwt), ...decoys(jwt)] },
        { status: 404, code: null },
      );
      await step(
        passthrough.url,
        `/elsewhere/orders?access_token=${jwt}`,
        {
          method: 'POST',
          headers: [bearer(jwt), ['Content-Type', 'application/json']],
          body: JSON.stringify({ token: jwt }),
        },
        { status: 404, code: null },
      );
    });

    it('the pass-through to an upstream that is not there: 503 from the proxy', async () => {
      const nowhere = await startProxy({
        upstreamUrl: `http://127.0.0.1:${String(await freePort())}`,
        logger,
        config: { upstream: { passthrough: true } },
      });
      try {
        const jwt = await canary();
        await step(
          nowhere.url,
          `/elsewhere?access_token=${jwt}`,
          { headers: [bearer(jwt)] },
          { status: 503, code: 'upstream_unavailable' },
        );
      } finally {
        await nowhere.close();
      }
    });

    it('the admin plane: a token that is not the admin token, the admin token in query and cookie', async () => {
      const jwt = await canary();
      const base = main.adminUrl ?? '';
      await step(
        base,
        '/admin/config',
        { headers: [bearer(jwt), ['Cookie', `session=${ADMIN_TOKEN}`]] },
        { status: 401, code: 'unauthenticated' },
      );
      await step(
        base,
        '/admin/config',
        { headers: [['Cookie', `session=${ADMIN_TOKEN}`]] },
        { status: 401, code: 'unauthenticated' },
      );
      await step(
        base,
        `/admin/config?token=${ADMIN_TOKEN}`,
        { headers: [bearer(ADMIN_TOKEN)] },
        { status: 200, code: null },
      );
      await step(base, '/admin/nothing-here', { headers: [bearer(ADMIN_TOKEN)] }, { status: 404, code: 'not_found' });
      await step(base, '/healthz', { headers: [bearer(ADMIN_TOKEN)] }, { status: 200, code: null });
    });
  });

  describe('a token in the path (the path is logged word by word, docs/operations.md#logs)', () => {
    it('the data plane: where a record id goes, where the resource goes, past the id, split, escaped', async () => {
      const jwt = await canary();
      const [header, payload, signature] = jwt.split('.');
      const headers = [bearer(jwt)];
      await step(
        main.url,
        `${P}/receipts/${jwt}`,
        { headers },
        { status: 404, code: 'not_found', path: `${P}/receipts/{redacted}` },
      );
      await step(main.url, `${P}/${jwt}`, { headers }, { status: 404, code: 'not_found', path: `${P}/{redacted}` });
      await step(
        main.url,
        `${P}/${jwt}/receipts?per_page=2`,
        { headers },
        { status: 404, code: 'not_found', path: `${P}/{redacted}/receipts` },
      );
      await step(
        main.url,
        `${P}/receipts/7/${jwt}`,
        { headers },
        { status: 404, code: 'not_found', path: `${P}/receipts/{redacted}/{redacted}` },
      );
      await step(
        main.url,
        `${P}/receipts/${header}/${payload}/${signature}`,
        { headers },
        { status: 404, code: 'not_found', path: `${P}/receipts/{redacted}/{redacted}/{redacted}` },
      );
      await step(
        main.url,
        `${P}/receipts/%65${jwt.slice(1)}`,
        { headers },
        { status: 404, code: 'not_found', path: `${P}/receipts/{redacted}` },
      );
      await step(
        main.url,
        `${P}/receipts/${jwt}`,
        { method: 'HEAD', headers },
        { status: 404, code: 'not_found', path: `${P}/receipts/{redacted}` },
      );
      // No credentials at all: the 401 comes first, and its line is as careful.
      await step(
        main.url,
        `${P}/receipts/${jwt}`,
        {},
        { status: 401, code: 'unauthenticated', path: `${P}/receipts/{redacted}` },
      );
    });

    it('the fallback and the pass-through', async () => {
      const jwt = await canary();
      await step(
        main.url,
        `/${jwt}`,
        { headers: [bearer(jwt)] },
        { status: 404, code: 'not_found', path: '/{redacted}' },
      );
      await step(
        main.url,
        `/elsewhere/${jwt}/x`,
        {},
        { status: 404, code: 'not_found', path: '/elsewhere/{redacted}/x' },
      );
      await step(
        passthrough.url,
        `${P}/${jwt}`,
        { headers: [bearer(jwt)] },
        { status: 404, code: null, path: `${P}/{redacted}` },
      );
      await step(
        passthrough.url,
        `/elsewhere/${jwt}`,
        { method: 'POST', headers: [bearer(jwt)], body: '{}' },
        { status: 404, code: null, path: '/elsewhere/{redacted}' },
      );
    });

    it('the admin port: a JWT and the admin token in its paths', async () => {
      const jwt = await canary();
      const base = main.adminUrl ?? '';
      await step(
        base,
        `/admin/${jwt}`,
        { headers: [bearer(ADMIN_TOKEN)] },
        { status: 404, code: 'not_found', path: '/admin/{redacted}' },
      );
      await step(
        base,
        `/admin/${ADMIN_TOKEN}`,
        {},
        { status: 401, code: 'unauthenticated', path: '/admin/{redacted}' },
      );
      await step(base, `/${ADMIN_TOKEN}`, {}, { status: 404, code: 'not_found', path: '/{redacted}' });
    });

    it('an admin token that looks like a word is still never logged, in a path or as a request id', async () => {
      const base = wordy.adminUrl ?? '';
      await step(
        base,
        `/admin/${WORDY_ADMIN_TOKEN}`,
        {},
        { status: 401, code: 'unauthenticated', path: '/admin/{redacted}' },
      );
      await step(
        wordy.url,
        `${P}/${WORDY_ADMIN_TOKEN}`,
        { headers: [bearer(await canary())] },
        { status: 404, code: 'not_found', path: `${P}/{redacted}` },
      );
      // The admin API's answers carry no X-Request-Id: the line is the last one for its path.
      const res = await send(base, '/admin/config', {
        headers: [bearer(WORDY_ADMIN_TOKEN), ['X-Request-Id', WORDY_ADMIN_TOKEN]],
      });
      expect(res.status).toBe(200);
      const line = logLines()
        .filter((logged) => logged.path === '/admin/config' && 'status' in logged)
        .at(-1);
      expect(line?.req_id).toMatch(/^[0-9a-f-]{36}$/);
    });
  });

  it('a token short enough to pass for a request id is not taken as one', async () => {
    const short = remember(await new SignJWT({ company_id: 1 }).setProtectedHeader({ alg: 'HS256' }).sign(DEV_KEY));
    expect(short.length).toBeLessThanOrEqual(128);
    const { res, line } = await step(
      main.url,
      `${P}/receipts?per_page=2`,
      { headers: [bearer(await canary()), ['X-Request-Id', short]] },
      { status: 200, code: null },
    );
    expect(res.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
    expect(line.req_id).toBe(res.headers['x-request-id']);
  });

  it('the capture saw every request line (so the absence of secrets means something)', () => {
    const lines = logLines().filter((line) => 'status' in line && 'req_id' in line);
    expect(lines.length).toBeGreaterThanOrEqual(stepCount);
    expect(secrets.size).toBeGreaterThan(20);
    expect(new Set(lines.map((line) => line.code))).toEqual(
      new Set([
        undefined,
        'unauthenticated',
        'invalid_request',
        'invalid_parameter',
        'forbidden',
        'not_found',
        'method_not_allowed',
        'rate_limited',
        'bad_gateway',
        'upstream_timeout',
        'upstream_unavailable',
      ]),
    );
  });
});
