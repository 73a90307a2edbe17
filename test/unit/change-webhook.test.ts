/**
 * The live sandbox's change feed (src/sandbox/change-webhook.ts) against a real HTTP listener: the
 * changes of one turn in one POST, grouped by company and resource, with the bearer token; a POST
 * answered 503, 429 or not at all sent again, the same body, after waits that grow (and no shorter
 * than `Retry-After`), changes made meanwhile waiting behind it, merged; a 400 not sent again, its
 * changes counted dropped; the status never shows the token.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import type { Change } from '../../src/sandbox/change-log.js';
import { backoffMs, ChangeWebhook, FIRST_BACKOFF_MS, MAX_BACKOFF_MS } from '../../src/sandbox/change-webhook.js';

interface Received {
  readonly authorization: string | undefined;
  readonly body: unknown;
  /** When it arrived (performance.now(), ms). */
  readonly at: number;
}

/** How the listener answers one POST: a status (with headers), or the connection cut without an answer. */
type Answer = number | { readonly status: number; readonly headers: Record<string, string> } | 'cut';

let server: Server | undefined;

function answer(res: ServerResponse, req: IncomingMessage, next: Answer | undefined): void {
  if (next === 'cut') return void req.socket.destroy();
  const { status, headers } = typeof next === 'object' ? next : { status: next ?? 200, headers: {} };
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end('{}');
}

interface Listener {
  readonly url: string;
  readonly received: Received[];
  /** Settles once `count` POSTs have arrived. */
  arrived(count: number): Promise<void>;
}

async function listen(answers: Answer[]): Promise<Listener> {
  const received: Received[] = [];
  const waiting: Array<{ readonly count: number; readonly resolve: () => void }> = [];
  server = createServer((req: IncomingMessage, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      received.push({
        authorization: req.headers.authorization,
        body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as unknown,
        at: performance.now(),
      });
      answer(res, req, answers.shift());
      for (const wait of waiting) if (received.length >= wait.count) wait.resolve();
    });
  });
  await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${String(port)}/admin/cache/invalidate`,
    received,
    arrived: (count) =>
      received.length >= count ? Promise.resolve() : new Promise((resolve) => waiting.push({ count, resolve })),
  };
}

afterEach(async () => {
  const closing = server;
  server = undefined;
  if (closing === undefined) return;
  closing.closeAllConnections();
  await new Promise((resolve) => closing.close(resolve));
});

function change(seq: number, company: string, resource: Change['resource'], id: number): Change {
  return { seq, at: 1_000 + seq, company, resource, id, kind: 'update', before: null, after: { id, company_id: 1 } };
}

/** The gaps between arrivals, ms. */
function gaps(received: readonly Received[]): number[] {
  return received.slice(1).map((arrival, i) => arrival.at - (received[i]?.at ?? 0));
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
    expect(received.map(({ authorization, body }) => ({ authorization, body }))).toEqual([
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
    expect(webhook.status()).toEqual({ url, delivered: 4, dropped: 0, retries: 0, pending: 0, lastFailure: null });
    expect(JSON.stringify(webhook.status())).not.toContain('secret-admin-token');
  });

  it('sends a body answered 503 again, the same body, after waits that grow', async () => {
    const { url, received } = await listen([503, 503, 200]);
    const webhook = new ChangeWebhook({ url, token: 't' });
    webhook.changed(change(1, '1', 'transfers', 10));
    await webhook.idle();
    expect(received).toHaveLength(3);
    expect(new Set(received.map((r) => JSON.stringify(r.body))).size).toBe(1);
    const [first = 0, second = 0] = gaps(received);
    // 100-150 ms, then 200-300 ms: the second wait starts where the first could end at most.
    expect(first).toBeGreaterThanOrEqual(FIRST_BACKOFF_MS);
    expect(second).toBeGreaterThanOrEqual(2 * FIRST_BACKOFF_MS);
    expect(second).toBeGreaterThan(first);
    expect(webhook.status()).toMatchObject({ delivered: 1, dropped: 0, retries: 2, pending: 0, lastFailure: '503' });
  });

  it('waits at least what a 429 says in Retry-After, and sends again an answer that never came', async () => {
    const { url, received } = await listen([{ status: 429, headers: { 'retry-after': '1' } }, 'cut', 200]);
    const webhook = new ChangeWebhook({ url, token: 't' });
    webhook.changed(change(1, '1', 'transfers', 10));
    await webhook.idle();
    expect(received).toHaveLength(3);
    expect(gaps(received)[0]).toBeGreaterThanOrEqual(1_000);
    expect(webhook.status()).toMatchObject({ delivered: 1, dropped: 0, retries: 2 });
  });

  it('gives up on a 400 at once, counts and reports its changes, and goes on with the next', async () => {
    const { url, received } = await listen([400, 200]);
    const givenUp: Array<[string, number]> = [];
    const webhook = new ChangeWebhook({ url, token: 't', onGiveUp: (failure, n) => givenUp.push([failure, n]) });
    webhook.changed(change(1, '1', 'transfers', 10));
    webhook.changed(change(2, '1', 'transfers', 11));
    await webhook.idle();
    expect(received).toHaveLength(1);
    expect(webhook.status()).toMatchObject({ delivered: 0, dropped: 2, retries: 0, lastFailure: '400' });
    expect(givenUp).toEqual([['400', 2]]);
    webhook.changed(change(3, '1', 'transfers', 12));
    await webhook.idle();
    expect(received).toHaveLength(2);
    expect(webhook.status()).toMatchObject({ delivered: 1, dropped: 2 });
  });

  it('keeps the changes made while a body is retried behind it, merged into the next body', async () => {
    const { url, received, arrived } = await listen([503, 200, 200]);
    const webhook = new ChangeWebhook({ url, token: 't' });
    webhook.changed(change(1, '1', 'transfers', 10));
    // Made once the first POST was answered 503, while its retry waits.
    await arrived(1);
    webhook.changed(change(2, '1', 'transfers', 11));
    webhook.changed(change(3, '1', 'transfers', 11));
    webhook.changed(change(4, '1', 'transfers', 12));
    await webhook.idle();
    expect(received.map((r) => r.body)).toEqual([
      { changes: [{ company_id: '1', resource: 'transfers', ids: [10] }] },
      { changes: [{ company_id: '1', resource: 'transfers', ids: [10] }] },
      { changes: [{ company_id: '1', resource: 'transfers', ids: [11, 12] }] },
    ]);
    expect(webhook.status()).toMatchObject({ delivered: 4, dropped: 0, retries: 1 });
  });

  it('stops retrying once closed: the body and the changes behind it are dropped', async () => {
    const { url, arrived } = await listen([503, 503, 503, 503]);
    const webhook = new ChangeWebhook({ url, token: 't' });
    webhook.changed(change(1, '1', 'transfers', 10));
    const idle = webhook.idle();
    await arrived(1);
    webhook.close();
    await idle;
    webhook.changed(change(2, '1', 'transfers', 11));
    expect(webhook.status()).toMatchObject({ delivered: 0, dropped: 2, pending: 0 });
  });

  it('backs off from 100 ms, doubling to 5 s, each wait up to half again at random', () => {
    expect(backoffMs(1, () => 0)).toBe(FIRST_BACKOFF_MS);
    expect(backoffMs(1, () => 0.999)).toBeLessThan(1.5 * FIRST_BACKOFF_MS);
    expect(backoffMs(2, () => 0)).toBe(2 * FIRST_BACKOFF_MS);
    expect(backoffMs(6, () => 0)).toBe(3_200);
    expect(backoffMs(7, () => 0)).toBe(MAX_BACKOFF_MS);
    expect(backoffMs(40, () => 0.999)).toBe(MAX_BACKOFF_MS);
    for (let attempt = 1; attempt < 6; attempt++)
      expect(backoffMs(attempt + 1, () => 0)).toBeGreaterThan(backoffMs(attempt, () => 0.999));
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
