/**
 * The OpenAPI description against the running proxy: served on the admin port without the admin
 * token, as committed; and real answers of the proxy (in front of the sandbox, real JWTs) judged
 * by a JSON Schema 2020-12 validator (ajv) against what the description says of their status:
 * bodies against the response schemas, and each documented header against its schema.
 */
import { readFileSync } from 'node:fs';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { OPENAPI_FILE } from '../../src/reference/openapi.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { type ProxyHandle, startProxy, startSandbox } from '../helpers/env.js';
import { getWithToken, type RawResponse, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';
import { freePort } from '../support/free-port.js';

type JsonObject = Record<string, unknown>;

interface Described {
  readonly headers?: Record<string, JsonObject>;
  readonly content?: Record<string, { readonly schema: JsonObject }>;
}

const document = JSON.parse(readFileSync(OPENAPI_FILE, 'utf8')) as {
  paths: Record<string, { get: { responses: Record<string, JsonObject> } }>;
  components: JsonObject;
};
// Strict mode off: the description's schemas sit in an OpenAPI document, whose own members
// (`openapi`, `paths`, …) are not JSON Schema keywords. The schemas themselves are 2020-12.
const ajv = new Ajv2020({ strict: false, allErrors: true });
ajv.addSchema(document, 'openapi');

/** Follows a local `$ref` (`#/components/...`) in the description. */
function deref(value: JsonObject): JsonObject {
  const ref = value.$ref;
  if (typeof ref !== 'string') return value;
  let target: unknown = document;
  for (const part of ref.replace(/^#\//, '').split('/'))
    target = (target as JsonObject)[part.replace(/~1/g, '/').replace(/~0/g, '~')];
  return deref(target as JsonObject);
}

/** A JSON pointer fragment for ajv: `/` and `~` escaped (RFC 6901 §3), then URI-encoded (RFC 6901 §6). */
function pointer(parts: readonly string[]): string {
  return parts.map((part) => encodeURIComponent(part.replace(/~/g, '~0').replace(/\//g, '~1'))).join('/');
}

/** Judges one real answer against the description of `path`'s GET for its status. */
function judge(path: string, answer: RawResponse): void {
  const operation = document.paths[path]?.get;
  expect(operation, path).toBeDefined();
  const described = operation?.responses[String(answer.status)];
  expect(described, `${path} ${String(answer.status)} is described`).toBeDefined();
  const response = deref(described ?? {}) as Described;
  const contentType = (answer.headers['content-type'] ?? '').split(';')[0] ?? '';
  if (answer.status !== 304) {
    const media = response.content?.[contentType];
    expect(media, `${path} ${String(answer.status)} as ${contentType}`).toBeDefined();
    const ref =
      typeof described?.$ref === 'string'
        ? described.$ref.replace(/^#/, '')
        : `/${pointer(['paths', path, 'get', 'responses', String(answer.status)])}`;
    const validateBody = ajv.getSchema(`openapi#${ref}/content/${pointer([contentType])}/schema`);
    if (validateBody === undefined) throw new Error('no schema');
    expect(validateBody(answer.json()), JSON.stringify(validateBody.errors)).toBe(true);
  }
  for (const [name, value] of Object.entries(response.headers ?? {})) {
    const given = answer.headers[name.toLowerCase()];
    if (given === undefined) continue;
    const schema = deref(value).schema as JsonObject;
    const validateHeader = ajv.compile(schema);
    const typed = schema.type === 'integer' ? Number(given) : given;
    expect(validateHeader(typed), `${name}: ${given} ${JSON.stringify(validateHeader.errors)}`).toBe(true);
  }
}

let sandbox: Sandbox;
let proxy: ProxyHandle;
let reader: string;

beforeAll(async () => {
  sandbox = await startSandbox();
  proxy = await startProxy({
    upstreamUrl: sandbox.url,
    adminToken: 'openapi-admin-token-of-some-length',
    config: { rateLimit: { perCredential: { points: 30, duration: 60 }, perCompany: { points: 1000, duration: 60 } } },
  });
  reader = await token({ company: 1, subject: 'openapi-reader' });
});

afterAll(async () => {
  await proxy.close();
  await sandbox.close();
});

const list = `${API_PREFIX}/receipts`;
const record = `${API_PREFIX}/receipts/{id}`;

describe('OpenAPI description, served and judged against real answers', () => {
  it('is served on the admin port as committed, without the admin token', async () => {
    const served = await send(proxy.adminUrl ?? '', '/openapi.json');
    expect(served.status).toBe(200);
    expect(served.headers['content-type']).toMatch(/^application\/json/);
    expect(served.text).toBe(readFileSync(OPENAPI_FILE, 'utf8'));
  });

  it('describes a page, a record, a 304 and a cached page', async () => {
    const page = await getWithToken(proxy.url, `${list}?per_page=3`, reader);
    expect(page.status).toBe(200);
    judge(list, page);
    const again = await getWithToken(proxy.url, `${list}?per_page=3`, reader);
    expect(again.headers['cache-status']).toMatch(/hit/);
    judge(list, again);
    const first = (page.json() as { data: Array<{ id: number }> }).data[0];
    const one = await getWithToken(proxy.url, `${list}/${String(first?.id)}`, reader);
    expect(one.status).toBe(200);
    judge(record, one);
    const unchanged = await getWithToken(proxy.url, `${list}?per_page=3`, reader, {
      headers: [['If-None-Match', page.headers.etag ?? '']],
    });
    expect(unchanged.status).toBe(304);
    judge(list, unchanged);
  });

  it("describes the proxy's own errors: 400, 401 (with and without a token), 403, 404 and 429", async () => {
    const cases: Array<readonly [string, Promise<RawResponse>, number, string]> = [
      [list, getWithToken(proxy.url, `${list}?per_page=0`, reader), 400, 'invalid_parameter'],
      [list, getWithToken(proxy.url, `${list}?access_token=x`, reader), 400, 'invalid_request'],
      [list, send(proxy.url, list), 401, 'unauthenticated'],
      [list, getWithToken(proxy.url, list, 'not.a.token'), 401, 'unauthenticated'],
      [list, getWithToken(proxy.url, list, await token({ company: 1, permissions: ['view_slab'] })), 403, 'forbidden'],
      [record, getWithToken(proxy.url, `${list}/0123`, reader), 404, 'not_found'],
    ];
    for (const [path, pending, status, code] of cases) {
      const answer = await pending;
      expect(answer.status).toBe(status);
      expect((answer.json() as { code?: string }).code).toBe(code);
      judge(path, answer);
    }
    const flooder = await token({ company: 1, subject: 'openapi-flood' });
    let limited: RawResponse | undefined;
    for (let i = 0; i < 31 && limited === undefined; i++) {
      const answer = await getWithToken(proxy.url, `${list}?per_page=3`, flooder);
      if (answer.status === 429) limited = answer;
    }
    if (limited === undefined) throw new Error('no 429 within 31 requests');
    expect(limited.status).toBe(429);
    expect((limited.json() as { code?: string }).code).toBe('rate_limited');
    judge(list, limited);
  });

  it("describes the upstream's failures: 502 and 503", async () => {
    sandbox.faults.set({ status: 500, resource: 'stocktakes', times: 1 });
    const bad = await getWithToken(proxy.url, `${API_PREFIX}/stocktakes?per_page=2`, reader);
    expect(bad.status).toBe(502);
    judge(`${API_PREFIX}/stocktakes`, bad);
    // Nothing listens where this proxy's upstream should be: refused.
    const orphan = await startProxy({ upstreamUrl: `http://127.0.0.1:${String(await freePort())}` });
    try {
      const refused = await getWithToken(orphan.url, `${API_PREFIX}/transfers?per_page=2`, reader);
      expect(refused.status).toBe(503);
      expect((refused.json() as { code?: string }).code).toBe('upstream_unavailable');
      judge(`${API_PREFIX}/transfers`, refused);
    } finally {
      await orphan.close();
    }
  });
});
