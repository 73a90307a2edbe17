/**
 * Protocol edges where a client library would hide the bytes, so every request here is written
 * to a raw socket exactly as given (docs/clients.md#request-rules): CONNECT, the Host header's three
 * faults (RFC 9112 §3.2), a 304's header fields (RFC 9110 §15.4.5) and the RFC 6750 `error`
 * attribute of every bearer challenge. Each refusal is problem+json with its `code`, on the
 * client port and on the admin port, and leaves one request line in the log.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { createLogger } from '../../src/observability/logger.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, type RawResponse, type SendOptions, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';

const P = API_PREFIX;
const ADMIN_TOKEN = 'protocol-edges-admin-token-0123456789abcdef';

const lines: Array<Record<string, unknown>> = [];
const logger = createLogger(
  'info',
  new Writable({
    write(chunk: Buffer, _encoding, callback) {
      for (const line of chunk.toString('utf8').split('\n'))
        if (line !== '') lines.push(JSON.parse(line) as Record<string, unknown>);
      callback();
    },
  }),
);

let sandbox: Sandbox;
let proxy: ProxyHandle;
let bearer: string;
let admin: string;

beforeAll(async () => {
  sandbox = await startSandbox();
  proxy = await startProxy({ upstreamUrl: sandbox.url, adminToken: ADMIN_TOKEN, logger });
  admin = proxy.adminUrl ?? '';
  bearer = await token();
});
afterAll(async () => {
  await proxy.close();
  await sandbox.close();
});

function problemCode(res: RawResponse): unknown {
  expect(res.headers['content-type']).toBe('application/problem+json');
  return (res.json() as { code?: unknown }).code;
}

/** The request line logged for an answer, found by the id the client was given. */
function loggedLine(res: RawResponse): Record<string, unknown> | undefined {
  const id = res.headers['x-request-id'];
  expect(id).toBeDefined();
  const found = lines.filter((line) => line.req_id === id && 'status' in line);
  expect(found).toHaveLength(1);
  return found[0];
}

describe('CONNECT', () => {
  it.each([
    ['the client port', () => proxy.url],
    ['the admin port', () => admin],
  ])('on %s: 405 problem+json with Allow, then the connection closes (no tunnel)', async (_port, base) => {
    const res = await send(base(), 'slab.example:443', {
      method: 'CONNECT',
      headers: [['Authorization', `Bearer ${bearer}`]],
    });
    expect(res.status).toBe(405);
    expect(problemCode(res)).toBe('method_not_allowed');
    expect(res.headers.allow).toBe('GET, HEAD, OPTIONS');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers.connection).toBe('close');
    expect(loggedLine(res)).toMatchObject({
      method: 'CONNECT',
      status: 405,
      code: 'method_not_allowed',
      path: '(authority-form)',
    });
  });

  it('bytes sent after the CONNECT head are never read as a request', async () => {
    const smuggledTarget = `${P}/receipts?per_page=41`;
    const smuggled = `GET ${smuggledTarget} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${bearer}\r\n\r\n`;
    const before = lines.length;
    const res = await send(proxy.url, 'slab.example:443', { method: 'CONNECT', body: smuggled });
    expect(res.status).toBe(405);
    // One answer, one request line: the smuggled GET was neither answered nor forwarded.
    expect(lines.slice(before).filter((line) => 'status' in line)).toEqual([
      expect.objectContaining({ method: 'CONNECT', status: 405 }),
    ]);
    expect(sandbox.stats().byTarget[smuggledTarget]).toBeUndefined();
  });
});

describe('Host (RFC 9112 §3.2)', () => {
  const cases: ReadonlyArray<readonly [string, SendOptions]> = [
    ['two Host headers', { headers: [['Host', 'elsewhere.example']] }],
    ['no Host header (HTTP/1.1)', { omitHost: true }],
    ['a Host that is not a host', { omitHost: true, headers: [['Host', 'slab example/x']] }],
  ];
  const targets = [
    ['a read', `${P}/receipts`],
    ['a path outside the API', '/elsewhere'],
  ] as const;

  for (const [fault, options] of cases) {
    for (const [kind, target] of targets) {
      it(`${fault}, ${kind}: 400 invalid_request`, async () => {
        const res = await send(proxy.url, target, {
          ...options,
          headers: [...(options.headers ?? []), ['Authorization', `Bearer ${bearer}`]],
        });
        expect(res.status).toBe(400);
        expect(problemCode(res)).toBe('invalid_request');
        expect(loggedLine(res)).toMatchObject({ status: 400, code: 'invalid_request' });
      });
    }
    it(`${fault}, the admin port: 400 invalid_request`, async () => {
      const res = await send(admin, '/admin/config', {
        ...options,
        headers: [...(options.headers ?? []), ['Authorization', `Bearer ${ADMIN_TOKEN}`]],
      });
      expect(res.status).toBe(400);
      expect(problemCode(res)).toBe('invalid_request');
    });
  }

  it('no upstream request for any of them', () => {
    expect(sandbox.stats().byTarget[`${P}/receipts?per_page=30`]).toBeUndefined();
  });

  it('HTTP/1.0 needs no Host; an IP literal with a port is a host', async () => {
    const old = await send(proxy.url, `${P}/receipts?per_page=2`, {
      omitHost: true,
      httpVersion: '1.0',
      headers: [['Authorization', `Bearer ${bearer}`]],
    });
    expect(old.status).toBe(200);
    const literal = await send(proxy.url, `${P}/receipts?per_page=2`, {
      omitHost: true,
      headers: [
        ['Host', '[::1]:8080'],
        ['Authorization', `Bearer ${bearer}`],
      ],
    });
    expect(literal.status).toBe(200);
  });
});

describe('304 Not Modified (RFC 9110 §15.4.5)', () => {
  it('repeats the caching fields and carries no Content-Type (nor a body)', async () => {
    const target = `${P}/warehouses?per_page=3`;
    const page = await getWithToken(proxy.url, target, bearer);
    const etag = page.headers.etag ?? '';
    const res = await getWithToken(proxy.url, target, bearer, { headers: [['If-None-Match', etag]] });
    expect(res.status).toBe(304);
    const names = res.headerList.map(([name]) => name);
    expect(names).not.toContain('content-type');
    expect(names).not.toContain('content-length');
    expect(res.headers).toMatchObject({
      etag,
      vary: 'Accept-Encoding, Authorization',
      'cache-control': page.headers['cache-control'],
    });
    expect(res.headers.age).toMatch(/^\d+$/);
  });
});

describe('WWW-Authenticate carries the RFC 6750 §3.1 error code on every refused bearer request', () => {
  it('400: two Authorization headers, and a token in the query → error="invalid_request"', async () => {
    const two = await send(proxy.url, `${P}/receipts`, {
      headers: [
        ['Authorization', `Bearer ${bearer}`],
        ['Authorization', `Bearer ${bearer}`],
      ],
    });
    const inQuery = await send(proxy.url, `${P}/receipts?access_token=${bearer}`);
    for (const res of [two, inQuery]) {
      expect(res.status).toBe(400);
      expect(problemCode(res)).toBe('invalid_request');
      expect(res.headers['www-authenticate']).toBe('Bearer realm="slab-ops", error="invalid_request"');
    }
  });

  it('401: no token is a bare challenge; a bad one says error="invalid_token"', async () => {
    const none = await send(proxy.url, `${P}/receipts`);
    expect(none.status).toBe(401);
    expect(none.headers['www-authenticate']).toBe('Bearer realm="slab-ops"');
    const bad = await getWithToken(proxy.url, `${P}/receipts`, `${bearer}x`);
    expect(bad.status).toBe(401);
    expect(bad.headers['www-authenticate']).toBe('Bearer realm="slab-ops", error="invalid_token"');
  });

  it('403: a missing permission → error="insufficient_scope"; a missing scope names it', async () => {
    const permission = await getWithToken(proxy.url, `${P}/receipts`, await token({ permissions: ['view_slab'] }));
    expect(permission.status).toBe(403);
    expect(problemCode(permission)).toBe('forbidden');
    expect(permission.headers['www-authenticate']).toBe('Bearer realm="slab-ops", error="insufficient_scope"');
    const scope = await getWithToken(proxy.url, `${P}/receipts`, await token({ scope: 'profile' }));
    expect(scope.status).toBe(403);
    expect(scope.headers['www-authenticate']).toBe(
      'Bearer realm="slab-ops", error="insufficient_scope", scope="operations:read"',
    );
  });
});
