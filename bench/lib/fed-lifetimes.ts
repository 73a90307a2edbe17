/**
 * Lifetimes for a proxy told of every change (docs/cache.md#with-a-change-feed): while a system of
 * record sends each change to `/admin/cache/invalidate`, a page's TTL is only the safety net for a
 * change the feed lost, so the invalidated runs of the freshness yardstick raise every resource's
 * to `FED_TTL` by the run-time overrides (`PUT /admin/cache/ttl/<resource>`), as an operator would,
 * and take them back after.
 */
import { RESOURCE_NAMES } from '../../src/catalog/resources.js';

/** Seconds a page told of by the feed stays fresh without it. */
export const FED_TTL = 300;

async function override(
  adminUrl: string,
  adminToken: string,
  resource: string,
  ttl: number | undefined,
): Promise<void> {
  const response = await fetch(`${adminUrl}/admin/cache/ttl/${resource}`, {
    method: ttl === undefined ? 'DELETE' : 'PUT',
    headers: { authorization: `Bearer ${adminToken}`, 'content-type': 'application/json' },
    ...(ttl !== undefined && { body: JSON.stringify({ ttl }) }),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`TTL override of ${resource}: ${String(response.status)} ${text}`);
}

/** Every resource's TTL `FED_TTL` on every replica (the overrides are shared through Redis). */
export async function raiseFedLifetimes(adminUrl: string, adminToken: string): Promise<void> {
  for (const resource of RESOURCE_NAMES) await override(adminUrl, adminToken, resource, FED_TTL);
}

/** Every resource back to the file's policy. */
export async function dropFedLifetimes(adminUrl: string, adminToken: string): Promise<void> {
  for (const resource of RESOURCE_NAMES) await override(adminUrl, adminToken, resource, undefined);
}

/** Until every replica's overrides in force (`GET /admin/cache/ttl`) give every resource `ttl`. */
export async function awaitLifetimes(
  adminUrls: readonly string[],
  adminToken: string,
  ttl: number | undefined,
): Promise<void> {
  const settled = async (adminUrl: string): Promise<boolean> => {
    const response = await fetch(`${adminUrl}/admin/cache/ttl`, { headers: { authorization: `Bearer ${adminToken}` } });
    const { overrides } = (await response.json()) as { overrides?: Record<string, { ttl?: number }> };
    return RESOURCE_NAMES.every((resource) => overrides?.[resource]?.ttl === ttl);
  };
  for (const adminUrl of adminUrls)
    for (let tries = 0; !(await settled(adminUrl)); tries++) {
      if (tries === 100) throw new Error(`${adminUrl}: the TTL overrides did not arrive within 10 s`);
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
}
