/** Small HTTP helpers: one GET, a replica's readiness, and the sandbox's test-only control API. */
import { request } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import type { Launched } from './processes.js';

export interface Fetched {
  readonly status: number;
  readonly body: Buffer;
  readonly headers: Headers;
}

export async function get(url: string, headers: Readonly<Record<string, string>> = {}): Promise<Fetched> {
  const response = await fetch(url, { headers });
  return { status: response.status, body: Buffer.from(await response.arrayBuffer()), headers: response.headers };
}

/** One GET whose body is the bytes on the wire: not decoded, whatever its `Content-Encoding` (fetch would). */
export function getEncoded(
  url: string,
  headers: Readonly<Record<string, string>> = {},
): Promise<{ readonly status: number; readonly body: Buffer; readonly contentEncoding: string | undefined }> {
  return new Promise((resolve, reject) => {
    const sent = request(url, { headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          body: Buffer.concat(chunks),
          contentEncoding: response.headers['content-encoding'],
        }),
      );
      response.on('error', reject);
    });
    sent.on('error', reject);
    sent.end();
  });
}

export interface ReadyOptions {
  readonly timeoutMs: number;
  /** Also wait until the replica reports its Redis usable (`"redis":"ok"`). */
  readonly redis: boolean;
}

/**
 * Polls a replica's /readyz until it is 200 (and, if asked, reports Redis ok). The admin port's
 * readiness is the only signal a replica gives with its stdout discarded; fails at once if the
 * process exits.
 */
export async function waitReady(launched: Launched, adminUrl: string, options: ReadyOptions): Promise<void> {
  const deadline = Date.now() + options.timeoutMs;
  let last = 'no answer';
  while (Date.now() < deadline) {
    if (launched.hasExited())
      throw new Error(`${launched.name} exited at start; stderr: ${launched.errors().slice(-800)}`);
    try {
      const response = await fetch(`${adminUrl}/readyz`);
      const body = await response.text();
      last = `${String(response.status)} ${body}`;
      if (response.status === 200 && (!options.redis || redisOk(body))) return;
    } catch {
      // not listening yet
    }
    await delay(50);
  }
  throw new Error(
    `${launched.name}: not ready after ${String(options.timeoutMs)} ms (last /readyz: ${last}); stderr: ${launched.errors().slice(-800)}`,
  );
}

function redisOk(body: string): boolean {
  try {
    const parsed: unknown = JSON.parse(body);
    return typeof parsed === 'object' && parsed !== null && 'redis' in parsed && parsed.redis === 'ok';
  } catch {
    return false;
  }
}

/** The sandbox's control API (it runs with SANDBOX_CONTROL=1). */
export async function sandboxControl(
  sandboxUrl: string,
  method: string,
  action: string,
  body?: unknown,
): Promise<unknown> {
  const response = await fetch(`${sandboxUrl}/__sandbox/${action}`, {
    method,
    ...(body !== undefined && { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } }),
  });
  const value: unknown = await response.json();
  if (!response.ok) throw new Error(`sandbox ${method} ${action}: ${String(response.status)} ${JSON.stringify(value)}`);
  return value;
}

export interface SandboxStats {
  /** Requests it has served since its start (or the last reset). */
  readonly served: number;
  readonly inFlight: number;
  readonly byTarget: Readonly<Record<string, number>>;
}

export async function sandboxStats(sandboxUrl: string): Promise<SandboxStats> {
  const value = await sandboxControl(sandboxUrl, 'GET', 'stats');
  if (typeof value !== 'object' || value === null || !('served' in value) || typeof value.served !== 'number')
    throw new Error('sandbox stats: unexpected shape');
  const inFlight = 'inFlight' in value && typeof value.inFlight === 'number' ? value.inFlight : 0;
  const byTarget: Record<string, number> = {};
  if ('byTarget' in value && typeof value.byTarget === 'object' && value.byTarget !== null) {
    for (const [target, count] of Object.entries(value.byTarget))
      if (typeof count === 'number') byTarget[target] = count;
  }
  return { served: value.served, inFlight, byTarget };
}
