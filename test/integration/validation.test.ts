/**
 * The validation table end to end: every refused request gets its documented status and code from
 * the proxy itself, and none of them ever reaches the upstream (the sandbox's request count).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { REFUSED_PARAMETERS, REFUSED_REQUESTS } from '../fixtures/validation-cases.js';
import { startStack } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';

interface Problem {
  readonly code: string;
  readonly status: number;
  readonly parameter?: string;
  readonly request_id: string;
}

describe('validation through the proxy', () => {
  let stack: Awaited<ReturnType<typeof startStack>>;
  let bearer: string;
  beforeAll(async () => {
    stack = await startStack();
    bearer = await token();
  });
  afterAll(() => stack.close());

  it.each(REFUSED_PARAMETERS)('%s: 400 invalid_parameter, upstream untouched', async (_label, target, parameter) => {
    const before = stack.sandbox.stats().served;
    const res = await getWithToken(stack.proxy.url, target, bearer);
    expect(res.status).toBe(400);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(res.headers['cache-control']).toBe('no-store');
    const problem = res.json() as Problem;
    expect(problem.code).toBe('invalid_parameter');
    expect(problem.status).toBe(400);
    expect(problem.parameter).toBe(parameter);
    expect(problem.request_id).toBe(res.headers['x-request-id']);
    expect(stack.sandbox.stats().served).toBe(before);
  });

  it.each(REFUSED_REQUESTS)('%s: %s, upstream untouched', async (_label, target, code) => {
    const before = stack.sandbox.stats().served;
    const res = await getWithToken(stack.proxy.url, target, bearer);
    expect((res.json() as Problem).code).toBe(code);
    expect(res.status).toBe(code === 'not_found' ? 404 : 400);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(stack.sandbox.stats().served).toBe(before);
  });

  it.each(['POST', 'PUT', 'PATCH', 'DELETE', 'TRACE', 'PROPFIND'])('%s on a read: 405 with Allow', async (method) => {
    const before = stack.sandbox.stats().served;
    const res = await send(stack.proxy.url, `${API_PREFIX}/receipts/5`, {
      method,
      headers: [['Authorization', `Bearer ${bearer}`]],
      ...(method === 'POST' && { body: '{}' }),
    });
    expect(res.status).toBe(405);
    expect((res.json() as Problem).code).toBe('method_not_allowed');
    expect(res.headers.allow).toBe('GET, HEAD, OPTIONS');
    expect(stack.sandbox.stats().served).toBe(before);
  });

  it.each([
    ['an unknown method', 'BREW', [] as Array<readonly [string, string]>, 400, 'invalid_request'],
    ['oversized headers', 'GET', [['X-Filler', 'x'.repeat(20_000)] as const], 431, 'request_headers_too_large'],
  ])("%s, refused by Node's parser: problem+json all the same", async (_label, method, headers, status, code) => {
    const before = stack.sandbox.stats().served;
    const res = await send(stack.proxy.url, `${API_PREFIX}/receipts`, { method, headers });
    expect(res.status).toBe(status);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect((res.json() as Problem).code).toBe(code);
    expect(stack.sandbox.stats().served).toBe(before);
  });

  it('OPTIONS: 204 with Allow, no token needed, upstream untouched', async () => {
    const before = stack.sandbox.stats().served;
    const res = await send(stack.proxy.url, `${API_PREFIX}/receipts`, { method: 'OPTIONS' });
    expect(res.status).toBe(204);
    expect(res.headers.allow).toBe('GET, HEAD, OPTIONS');
    expect(stack.sandbox.stats().served).toBe(before);
  });

  it('HEAD of a refused request has the status and headers but no body', async () => {
    const res = await send(stack.proxy.url, `${API_PREFIX}/receipts?per_page=0`, {
      method: 'HEAD',
      headers: [['Authorization', `Bearer ${bearer}`]],
    });
    expect(res.status).toBe(400);
    expect(Number(res.headers['content-length'])).toBeGreaterThan(0);
    expect(res.body.length).toBe(0);
  });

  it('authentication comes before validation: no token and a bad parameter is 401', async () => {
    const res = await send(stack.proxy.url, `${API_PREFIX}/receipts?per_page=0`);
    expect(res.status).toBe(401);
    expect((res.json() as Problem).code).toBe('unauthenticated');
  });

  it('request-level refusals come before authentication', async () => {
    const res = await send(stack.proxy.url, `${API_PREFIX}/receipts?access_token=x`);
    expect(res.status).toBe(400);
    expect((res.json() as Problem).code).toBe('invalid_request');
  });

  it('a valid request after all of that still reaches the upstream exactly once', async () => {
    const before = stack.sandbox.stats().served;
    const res = await getWithToken(stack.proxy.url, `${API_PREFIX}/receipts?per_page=%33%30`, bearer);
    expect(res.status).toBe(200);
    expect(stack.sandbox.stats().served).toBe(before + 1);
    expect(stack.sandbox.stats().byTarget[`${API_PREFIX}/receipts?per_page=30`]).toBeGreaterThanOrEqual(1);
  });
});
