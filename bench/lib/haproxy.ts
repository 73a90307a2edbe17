/**
 * The HAProxy anchor: Debian's HAProxy with bench/haproxy-cache.cfg, doing the proxy's job on a
 * hit by configuration (the token verified on every request, its expiry, the company and the
 * resource's permissions from its claims, a per-company rate table, a cache keyed by company),
 * caching pages from a local origin. The bench warms it, checks every page is a hit, and measures
 * it like the other servers; its CPU is its one process's.
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { API_PREFIX, BASE_PERMISSION, RESOURCES } from '../../src/catalog/resources.js';
import { freePort } from '../../test/support/free-port.js';
import { get } from './http.js';
import { commandPath, type Launched, launch, ROOT } from './processes.js';

export const HAPROXY_TEMPLATE = join(ROOT, 'bench', 'haproxy-cache.cfg');

export interface HaproxySettings {
  /** The run's own directory: config and pid. */
  readonly dir: string;
  readonly port: number;
  readonly originPort: number;
  /** The HS256 secret the proxies verify with (base64url: safe inside the config's quotes). */
  readonly secret: string;
  /** Requests a company may make in 60 s before a 429 (the bench's never refuses). */
  readonly companyRate: number;
}

/**
 * One rule per resource that needs more than `view_slab` (checked for every request beside it): a
 * token without the resource's own permission is refused (seed §5), as the proxy's authorisation
 * step refuses it. A permission is matched as a JSON string inside the verified claims, quotes
 * included, so that `view_slab` is not found inside `view_slab_logistics`. No resource's name
 * begins another's, so a path's beginning names one resource.
 */
export function permissionRules(): string {
  for (const one of RESOURCES)
    for (const other of RESOURCES)
      if (one !== other && other.name.startsWith(one.name))
        throw new Error(`haproxy: ${one.name} begins ${other.name}: path_beg would not tell them apart`);
  return RESOURCES.filter((resource) => resource.permission !== BASE_PERMISSION)
    .map(
      (resource) =>
        `  http-request deny deny_status 403 if { path_beg ${API_PREFIX}/${resource.name} } !{ var(txn.claims) -m sub "\\"${resource.permission}\\"" }`,
    )
    .join('\n');
}

/** Fills in bench/haproxy-cache.cfg; every placeholder must be known. */
export function renderHaproxyConfig(template: string, settings: HaproxySettings): string {
  if (!/^[A-Za-z0-9_-]+$/.test(settings.secret)) throw new Error('haproxy: the secret must be base64url');
  const values: Record<string, string> = {
    DIR: settings.dir,
    PORT: String(settings.port),
    ORIGIN_PORT: String(settings.originPort),
    SECRET: settings.secret,
    COMPANY_RATE: String(settings.companyRate),
    PERMISSION_RULES: permissionRules(),
  };
  return template.replace(/\{\{([A-Z_]+)\}\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`${HAPROXY_TEMPLATE}: unknown placeholder {{${name}}}`);
    return value;
  });
}

/** HAProxy's path and version, or what to install. */
export async function findHaproxy(): Promise<{ path: string; version: string } | { missing: string }> {
  const path = commandPath('haproxy');
  if (path === undefined)
    return {
      missing: 'haproxy is not installed (Debian: apt-get install haproxy): the HAProxy anchor is skipped',
    };
  const probe = launch('haproxy -v', path, ['-v'], { env: { PATH: process.env.PATH ?? '' }, stdout: 'pipe' });
  await probe.exited;
  return { path, version: /version (\S+)/.exec(probe.output())?.[1] ?? 'unknown' };
}

export interface HaproxyCache {
  readonly launched: Launched;
  readonly url: string;
}

/** Starts HAProxy on the rendered config, in the foreground, and waits until it answers. */
export async function startHaproxyCache(
  haproxyPath: string,
  options: { dir: string; originUrl: string; secret: string; cpu?: number; companyRate?: number },
): Promise<HaproxyCache> {
  mkdirSync(options.dir, { recursive: true });
  const port = await freePort();
  const config = join(options.dir, 'haproxy.cfg');
  writeFileSync(
    config,
    renderHaproxyConfig(readFileSync(HAPROXY_TEMPLATE, 'utf8'), {
      dir: options.dir,
      port,
      originPort: Number(new URL(options.originUrl).port),
      secret: options.secret,
      companyRate: options.companyRate ?? 1_000_000_000,
    }),
  );
  const launched = launch('haproxy', haproxyPath, ['-db', '-f', config], {
    env: { PATH: process.env.PATH ?? '' },
    ...(options.cpu !== undefined && { cpu: options.cpu }),
    stdout: 'pipe',
  });
  const url = `http://127.0.0.1:${String(port)}`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (launched.hasExited()) throw new Error(`haproxy exited at start: ${launched.errors().slice(-1200)}`);
    const answered = await fetch(`${url}/`).then(
      async (response) => {
        await response.arrayBuffer();
        return true;
      },
      () => false,
    );
    if (answered) break;
    if (Date.now() > deadline) throw new Error(`haproxy did not answer on ${url}: ${launched.errors().slice(-800)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { launched, url };
}

/** Fetches every page with its company's token until HAProxy answers it from its cache. */
export async function warmHaproxy(url: string, pages: ReadonlyArray<{ path: string; authorization: string }>) {
  for (const page of pages) {
    let status = '';
    for (let attempt = 0; attempt < 3 && status !== 'HIT'; attempt++)
      status =
        (await get(`${url}${page.path}`, { authorization: page.authorization })).headers.get('x-cache-status') ?? '';
    if (status !== 'HIT') throw new Error(`haproxy does not answer ${page.path} from its cache`);
  }
}
