import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startStack } from '../helpers/env.js';
import { getWithToken, send } from '../helpers/http.js';
import { token } from '../helpers/tokens.js';

describe('the proxy in front of the sandbox', () => {
  let stack: Awaited<ReturnType<typeof startStack>>;
  beforeAll(async () => {
    stack = await startStack();
  });
  afterAll(() => stack.close());

  it('serves a list page with the upstream bytes', async () => {
    const t = await token();
    const viaProxy = await getWithToken(stack.proxy.url, '/api/slab/v1/operations/receipts?per_page=3', t);
    const direct = await getWithToken(stack.sandbox.url, '/api/slab/v1/operations/receipts?per_page=3', t);
    expect(viaProxy.status).toBe(200);
    expect(viaProxy.body.equals(direct.body)).toBe(true);
  });

  it('answers 401 without a token, without asking the upstream', async () => {
    const before = stack.sandbox.stats().served;
    const res = await send(stack.proxy.url, '/api/slab/v1/operations/receipts');
    expect(res.status).toBe(401);
    expect((res.json() as { code: string }).code).toBe('unauthenticated');
    expect(stack.sandbox.stats().served).toBe(before);
  });
});
