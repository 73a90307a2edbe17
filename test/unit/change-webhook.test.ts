/**
 * The live sandbox's change feed (src/sandbox/change-webhook.ts) against a real HTTP listener: the
 * changes of one turn in one POST, grouped by company and resource, with the bearer token; a POST
 * that fails tried once more, then the changes counted dropped; the status never shows the token.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Change } from '../../src/sandbox/change-log.js';
import { ChangeWebhook } from '../../src/sandbox/change-webhook.js';

interface Received {
  readonly authorization: string | undefined;
  readonly body: unknown;
}

let server: Server | undefined;

async function listen(statuses: number[]): Promise<{ url: string; received: Received[] }> {
  const received: Received[] = [];
  server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        authorization: req.headers.authorization,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown,
      });
      res.statusCode = statuses.shift() ?? 200;
      res.end('{}');
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${String(port)}/admin/cache/invalidate`, received };
}

afterEach(async () => {
  await new Promise((resolve) => server?.close(resolve));
  server = undefined;
});

function change(seq: number, company: string, resource: Change['resource'], id: number): Change {
  return { seq, at: 1_000 + seq, company, resource, id, kind: 'update', before: null, after: { id, company_id: 1 } };
}

describe('the change webhook', () => {
  it('sends the changes of one turn in one POST, grouped, with the token', async () => {
    const { url, received } = await listen([]);
    const webhook = new ChangeWebhook({ url, token: 'secret-admin-token' });
    webhook.changed(change(1, '1', 'transfers', 10));
    webhook.changed(change(2, '1', 'transfers', 11));
    webhook.changed(change(3, '2', 'remnants', 20));
    webhook.changed(change(4, '1', 'transfers', 10));
    await webhook.idle();
    expect(received).toEqual([
      {
        authorization: 'Bearer secret-admin-token',
        body: {
          changes: [
            { company_id: '1', resource: 'transfers', ids: [10, 11] },
            { company_id: '2', resource: 'remnants', ids: [20] },
          ],
        },
      },
    ]);
    expect(webhook.status()).toEqual({ url, delivered: 4, dropped: 0, pending: 0, lastFailure: null });
    expect(JSON.stringify(webhook.status())).not.toContain('secret-admin-token');
  });

  it('tries a failed POST once more, then drops its changes and says why', async () => {
    const { url, received } = await listen([503, 200, 500, 500]);
    const webhook = new ChangeWebhook({ url, token: 't' });
    webhook.changed(change(1, '1', 'transfers', 10));
    await webhook.idle();
    expect(webhook.status()).toMatchObject({ delivered: 1, dropped: 0 });
    webhook.changed(change(2, '1', 'transfers', 11));
    await webhook.idle();
    expect(received).toHaveLength(4);
    expect(webhook.status()).toMatchObject({ delivered: 1, dropped: 1, lastFailure: '500' });
  });

  it('splits a burst into bodies of at most 500 ids', async () => {
    const { url, received } = await listen([]);
    const webhook = new ChangeWebhook({ url, token: 't' });
    for (let i = 0; i < 1_200; i++) webhook.changed(change(i + 1, '1', 'transfers', 1_000 + i));
    await webhook.idle();
    const counts = received.map((r) =>
      (r.body as { changes: Array<{ ids: number[] }> }).changes.reduce((n, g) => n + g.ids.length, 0),
    );
    expect(counts).toEqual([500, 500, 200]);
    expect(webhook.status()).toMatchObject({ delivered: 1_200, dropped: 0 });
  });
});
