/**
 * Keyset walkers with and without next-page prefetch (docs/cache.md#prefetch): readers
 * that follow `meta.next_after_id` to the end of a collection over a cold cache, spending
 * WALKERS_THINK_MS on each page, against an upstream that takes WALKERS_UPSTREAM_MS a page. Each
 * case runs on a fresh proxy (in-process store), once with prefetch off and once on, and reports
 * the walk times, their ratio, what reached the upstream, and the proxy's own count of prefetches
 * started, used and wasted.
 *
 *   node dist-bench/bench/walkers.js     (after npm run build and tsc -p tsconfig.bench.json)
 *
 * The cases: one walker (company 1's 420 movements, 4 a page: 105 pages); the same with no time
 * spent on a page; and one walker for each of the sandbox's four companies at once.
 * Settings: WALKERS_THINK_MS (100), WALKERS_UPSTREAM_MS (100).
 */
import { randomBytes } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_PREFIX } from '../src/catalog/resources.js';
import { mintDevToken } from '../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../src/sandbox/dataset.js';
import { envInt } from './lib/env.js';
import { fmt, fmtInt, say, textTable, verdict } from './lib/format.js';
import { sandboxControl, sandboxStats } from './lib/http.js';
import { runProgram, scratchDir, stop } from './lib/processes.js';
import { requireBuild, startProxy, startSandbox } from './lib/services.js';

interface Walker {
  readonly company: string;
  readonly perPage: number;
}

interface CaseFigures {
  readonly seconds: number;
  readonly pages: number;
  readonly upstream: number;
  readonly prefetch: Readonly<Record<string, number>>;
}

const ONE: readonly Walker[] = [{ company: '1', perPage: 4 }];
const EVERY_COMPANY: readonly Walker[] = SANDBOX_COMPANIES.map((company) => ({
  company: String(company),
  perPage: String(company) === '1' ? 8 : 1,
}));

function config(dir: string, prefetch: boolean): string {
  const file = join(dir, `walkers-${prefetch ? 'on' : 'off'}.yaml`);
  writeFileSync(
    file,
    [
      'cache:',
      '  defaults: { ttl: 3600, staleWhileRevalidate: 30, staleIfError: 600, notFoundTtl: 10 }',
      `  resources: { movements: { ttl: 3600, prefetch: ${String(prefetch)} } }`,
      'rateLimit:',
      '  perCredential: { points: 1000000, duration: 60 }',
      '  perCompany: { points: 1000000, duration: 60 }',
      '',
    ].join('\n'),
  );
  return file;
}

/** Follows the walker's collection to its end; its pages. */
async function walk(base: string, bearer: string, walker: Walker, thinkMs: number): Promise<number> {
  let after: number | undefined;
  for (let pages = 1; ; pages++) {
    const target = `${API_PREFIX}/movements?per_page=${String(walker.perPage)}${after === undefined ? '' : `&after_id=${String(after)}`}`;
    const res = await fetch(`${base}${target}`, { headers: { authorization: bearer } });
    if (res.status !== 200) throw new Error(`${target}: ${String(res.status)}`);
    const page = (await res.json()) as { meta: { has_more: boolean; next_after_id?: number } };
    if (!page.meta.has_more) return pages;
    after = page.meta.next_after_id;
    if (thinkMs > 0) await new Promise((resolve) => setTimeout(resolve, thinkMs));
  }
}

/** The prefetch results that are a page's fate, not a walk ahead stopping short. */
const SETTLED = new Set(['started', 'used', 'wasted']);

/** The proxy's prefetch counts, by result. */
async function prefetchCounts(adminUrl: string): Promise<Record<string, number>> {
  const text = await (await fetch(`${adminUrl}/metrics`)).text();
  const counts: Record<string, number> = {};
  for (const match of text.matchAll(/^slab_proxy_prefetches_total\{result="([a-z]+)"\} (\d+)/gm))
    counts[match[1] ?? ''] = Number(match[2]);
  return counts;
}

async function runCase(
  sandboxUrl: string,
  secret: string,
  configFile: string,
  walkers: readonly Walker[],
  thinkMs: number,
): Promise<CaseFigures> {
  const proxy = await startProxy({
    name: 'proxy (walkers)',
    upstreamUrl: sandboxUrl,
    secret,
    configFile,
    logLevel: 'info',
  });
  try {
    const bearers = await Promise.all(walkers.map((w) => mintDevToken({ company: w.company, secret })));
    const before = (await sandboxStats(sandboxUrl)).served;
    const started = performance.now();
    const pages = await Promise.all(walkers.map((w, i) => walk(proxy.url, `Bearer ${bearers[i] ?? ''}`, w, thinkMs)));
    const seconds = (performance.now() - started) / 1000;
    // What was fetched ahead of the last pages lands after the walks end: counted once it has.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const upstream = (await sandboxStats(sandboxUrl)).served - before;
    return {
      seconds,
      pages: pages.reduce((a, b) => a + b, 0),
      upstream,
      prefetch: await prefetchCounts(proxy.adminUrl),
    };
  } finally {
    await stop(proxy.launched);
  }
}

runProgram('walkers', async () => {
  requireBuild();
  const thinkMs = envInt('WALKERS_THINK_MS', 100, 0, 10_000);
  const upstreamMs = envInt('WALKERS_UPSTREAM_MS', 100, 0, 10_000);
  const dir = scratchDir('slab-walkers-');
  const secret = randomBytes(48).toString('base64url');
  const sandbox = await startSandbox({ secret, rateLimit: 0 });
  await sandboxControl(sandbox.url, 'PUT', 'faults', { latencyMs: upstreamMs });
  say(
    `keyset walkers over a cold cache: ${String(upstreamMs)} ms an upstream page, ${String(thinkMs)} ms a walker's work on each`,
  );
  const cases = [
    { name: 'one walker', walkers: ONE, think: thinkMs, target: 0.6 },
    { name: 'one walker, no work on a page', walkers: ONE, think: 0, target: 1 },
    {
      name: `${String(EVERY_COMPANY.length)} walkers, one a company, at once`,
      walkers: EVERY_COMPANY,
      think: thinkMs,
      target: 0.65,
    },
  ];
  const rows: string[][] = [];
  let pass = true;
  try {
    for (const c of cases) {
      const off = await runCase(sandbox.url, secret, config(dir, false), c.walkers, c.think);
      const on = await runCase(sandbox.url, secret, config(dir, true), c.walkers, c.think);
      const ratio = on.seconds / off.seconds;
      const used = (on.prefetch.used ?? 0) / Math.max(1, on.prefetch.started ?? 0);
      const ok = ratio <= c.target && on.upstream <= off.upstream;
      const skipped = Object.entries(on.prefetch).filter(([result, n]) => n > 0 && !SETTLED.has(result));
      say(
        `  ${c.name}: walks ahead stopped short by ${skipped.map(([r, n]) => `${r} ${fmtInt(n)}`).join(', ') || 'nothing'}`,
      );
      pass &&= ok;
      rows.push([
        c.name,
        fmtInt(off.pages),
        `${fmt(off.seconds)} / ${fmt(on.seconds)}`,
        `${fmt(ratio)} (≤ ${fmt(c.target)}) ${verdict(ok)}`,
        `${fmtInt(off.upstream)} / ${fmtInt(on.upstream)}`,
        `${fmtInt(on.prefetch.started ?? 0)} / ${fmtInt(on.prefetch.used ?? 0)} / ${fmtInt(on.prefetch.wasted ?? 0)} (${fmt(100 * used, 0)}% used)`,
      ]);
    }
  } finally {
    await stop(sandbox.launched);
  }
  for (const line of textTable(
    ['case', 'pages', 'walk s, off / on', 'on / off', 'upstream, off / on', 'prefetches started / used / wasted'],
    rows,
  ))
    say(line);
  say(`WALKERS_RESULT ${JSON.stringify({ pass })}`);
  return 0;
});
