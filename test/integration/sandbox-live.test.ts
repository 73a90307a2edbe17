/**
 * The live sandbox over HTTP (docs/sandbox.md#live-mode): started and stopped through its control
 * API, a change made now shows in the next answer with a new `ETag` and a `Last-Modified` of the
 * change's second, a conditional request with the old validators gets the new page, and the log
 * lists the change; through the proxy, a revalidation of a page that changed stores the new body.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Change } from '../../src/sandbox/change-log.js';
import { API_PREFIX } from '../../src/sandbox/resources.js';
import type { Sandbox } from '../../src/sandbox/server.js';
import { getWithToken, send } from '../helpers/http.js';
import { startSandbox } from '../helpers/sandbox.js';
import { token } from '../helpers/tokens.js';

let sandbox: Sandbox;
let bearer: string;

beforeAll(async () => {
  sandbox = await startSandbox();
  bearer = await token({ company: 1 });
});

afterAll(() => sandbox.close());

function control(method: string, action: string, body?: unknown): ReturnType<typeof send> {
  return send(sandbox.url, `/__sandbox/${action}`, {
    method,
    headers: [['content-type', 'application/json']],
    ...(body !== undefined && { body: JSON.stringify(body) }),
  });
}

describe('the live sandbox', () => {
  it('starts and stops by its control API, and refuses rules it cannot take', async () => {
    const started = await control('PUT', 'live', {
      rules: [{ resource: 'remnants', kind: 'update', everyMs: 60_000, share: 0.01 }],
    });
    expect(started.status).toBe(200);
    expect(started.json()).toMatchObject({ running: true, rules: [{ resource: 'remnants', kind: 'update' }] });
    expect((await control('DELETE', 'live')).json()).toMatchObject({ running: false });
    const refused = await control('PUT', 'live', { rules: [{ resource: 'widgets', kind: 'update', everyMs: 500 }] });
    expect(refused.status).toBe(400);
    expect(refused.json()).toEqual({ error: 'rules[0].resource: no such resource' });
  });

  it('answers a change in the next page: a new ETag, Last-Modified at its second, and 200 to the old validators', async () => {
    expect((await control('PUT', 'live', { rules: [] })).status).toBe(200); // live, changed only by hand
    const target = `${API_PREFIX}/transfers?status=draft&per_page=100`;
    const before = await getWithToken(sandbox.url, target, bearer);
    const draft = (before.json() as { data: Array<{ id: number }> }).data[0];
    if (draft === undefined) throw new Error('no draft transfer');
    const made = await control('POST', 'changes', { resource: 'transfers', kind: 'move', id: draft.id });
    expect(made.status).toBe(201);
    const change = made.json() as Change;
    const after = await getWithToken(sandbox.url, target, bearer);
    expect(after.headers.etag).not.toBe(before.headers.etag);
    expect(after.headers['last-modified']).toBe(new Date(Math.floor(change.at / 1000) * 1000).toUTCString());
    expect((after.json() as { data: Array<{ id: number }> }).data.map((r) => r.id)).not.toContain(draft.id);
    const conditional = await getWithToken(sandbox.url, target, bearer, {
      headers: [['if-none-match', before.headers.etag ?? '']],
    });
    expect(conditional.status).toBe(200);
    const same = await getWithToken(sandbox.url, target, bearer, {
      headers: [['if-none-match', after.headers.etag ?? '']],
    });
    expect(same.status).toBe(304);
    const logged = (await control('GET', `changes?since=${String(change.at - 1)}&resource=transfers`)).json() as {
      changes: Change[];
    };
    expect(logged.changes.map((c) => [c.seq, c.id, c.kind])).toEqual([[change.seq, draft.id, 'move']]);
  });

  it('appends a record at the end of a collection, and 404s a change of a record it does not have', async () => {
    const appended = await control('POST', 'changes', { resource: 'movements', kind: 'append', company: 2 });
    expect(appended.status).toBe(201);
    const { id } = appended.json() as Change;
    const record = await getWithToken(
      sandbox.url,
      `${API_PREFIX}/movements/${String(id)}`,
      await token({ company: 2 }),
    );
    expect(record.status).toBe(200);
    expect((await control('POST', 'changes', { resource: 'movements', kind: 'update', id: 1 })).status).toBe(404);
  });
});
