/**
 * Coalescing: 500 concurrent cold requests for one key, alternating between the two proxies,
 * with the upstream slowed by 300 ms so that they all arrive while the first fill runs. The
 * sandbox counts what reached it: the goal is one upstream request for the 500.
 */
import { Agent, request } from 'node:http';
import { API_PREFIX } from '../../src/catalog/resources.js';
import { fmt, say, verdict } from '../lib/format.js';
import { sandboxControl, sandboxStats } from '../lib/http.js';

const COLD_REQUESTS = 500;
const TARGET_COALESCED_UPSTREAM = 1;

export interface CoalescingFigures {
  readonly requests: number;
  readonly upstream: number;
  readonly statuses: Readonly<Record<string, number>>;
  readonly pass: boolean;
}

interface Storm {
  readonly statuses: Record<string, number>;
  readonly cache: Record<string, number>;
  readonly ms: number;
}

async function storm(proxyUrls: readonly string[], path: string, authorization: string, total: number): Promise<Storm> {
  const agents = proxyUrls.map(() => new Agent({ keepAlive: true, maxSockets: Math.ceil(total / proxyUrls.length) }));
  const statuses: Record<string, number> = {};
  const cache: Record<string, number> = {};
  const count = (into: Record<string, number>, key: string): void => {
    into[key] = (into[key] ?? 0) + 1;
  };
  const started = performance.now();
  await Promise.all(
    Array.from({ length: total }, (_, i) => {
      const index = i % proxyUrls.length;
      const target = new URL(path, proxyUrls[index]);
      return new Promise<void>((resolve) => {
        const req = request(
          {
            host: target.hostname,
            port: target.port,
            path: `${target.pathname}${target.search}`,
            agent: agents[index],
            headers: { authorization },
          },
          (res) => {
            res.resume();
            res.on('end', () => {
              count(statuses, String(res.statusCode ?? 0));
              const header = res.headers['cache-status'];
              count(
                cache,
                typeof header !== 'string'
                  ? 'none'
                  : header.includes('collapsed')
                    ? 'collapsed'
                    : header.includes('fwd=miss')
                      ? 'miss (leader)'
                      : header.includes('hit')
                        ? 'hit'
                        : header,
              );
              resolve();
            });
          },
        );
        req.on('error', (error) => {
          count(statuses, `error ${error.message}`);
          resolve();
        });
        req.end();
      });
    }),
  );
  const ms = performance.now() - started;
  for (const agent of agents) agent.destroy();
  return { statuses, cache, ms };
}

export async function runCoalescing(
  proxyUrls: readonly string[],
  sandboxUrl: string,
  authorization: string,
): Promise<CoalescingFigures> {
  const path = `${API_PREFIX}/movements?item_type=slab&movement_type=sale`;
  await sandboxControl(sandboxUrl, 'POST', 'reset');
  await sandboxControl(sandboxUrl, 'PUT', 'faults', { latencyMs: 300, resource: 'movements' });
  const result = await storm(proxyUrls, path, authorization, COLD_REQUESTS);
  const after = await sandboxStats(sandboxUrl);
  await sandboxControl(sandboxUrl, 'POST', 'reset');
  const upstream = Object.entries(after.byTarget)
    .filter(([target]) => target.startsWith(`${API_PREFIX}/movements`))
    .reduce((sum, [, n]) => sum + n, 0);
  const pass = upstream === TARGET_COALESCED_UPSTREAM && result.statuses['200'] === COLD_REQUESTS;
  say(
    `coalescing: ${String(COLD_REQUESTS)} concurrent cold requests for ${path}, alternating between ${String(proxyUrls.length)} proxies, upstream slowed by 300 ms`,
  );
  say(
    `  done in ${fmt(result.ms, 0)} ms; statuses ${JSON.stringify(result.statuses)}; Cache-Status ${JSON.stringify(result.cache)}`,
  );
  say(
    `  upstream requests for that key: ${String(upstream)} (all upstream requests: ${String(after.served)}) (target ${String(TARGET_COALESCED_UPSTREAM)}): ${verdict(pass)}`,
  );
  return { requests: COLD_REQUESTS, upstream, statuses: result.statuses, pass };
}
