/**
 * The nginx `proxy_cache` anchor: Debian's nginx with bench/nginx-cache.conf, caching pages
 * from a local origin. The bench warms it, checks every page is a HIT, and then measures it like
 * the other servers; its CPU is its worker's (the master only supervises, the cache manager and
 * loader idle).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../../test/support/free-port.js';
import { childPids, commandLine } from './cpu.js';
import { get } from './http.js';
import { commandPath, type Launched, launch, ROOT } from './processes.js';

export const NGINX_TEMPLATE = join(ROOT, 'bench', 'nginx-cache.conf');

export interface NginxSettings {
  /** The run's own directory: config, pid, logs, cache. */
  readonly dir: string;
  readonly port: number;
  readonly originPort: number;
}

/** Fills in bench/nginx-cache.conf; every placeholder must be known. */
export function renderNginxConfig(template: string, settings: NginxSettings): string {
  const values: Record<string, string> = {
    // As root, nginx would run its worker as `nobody`, which cannot write the run's private
    // cache directory; as anyone else the directive is ignored and so left out.
    USER: process.getuid?.() === 0 ? 'user root;' : '',
    DIR: settings.dir,
    PORT: String(settings.port),
    ORIGIN_PORT: String(settings.originPort),
  };
  return template.replace(/\{\{([A-Z_]+)\}\}/g, (_, name: string) => {
    const value = values[name];
    if (value === undefined) throw new Error(`${NGINX_TEMPLATE}: unknown placeholder {{${name}}}`);
    return value;
  });
}

/** nginx's path and version, or what to install. */
export async function findNginx(): Promise<{ path: string; version: string } | { missing: string }> {
  const path = commandPath('nginx');
  if (path === undefined)
    return {
      missing: 'nginx is not installed (Debian: apt-get install nginx): the nginx proxy_cache anchor is skipped',
    };
  const probe = launch('nginx -v', path, ['-v'], { env: { PATH: process.env.PATH ?? '' }, stdout: 'pipe' });
  await probe.exited;
  return { path, version: /nginx\/(\S+)/.exec(`${probe.output()} ${probe.errors()}`)?.[1] ?? 'unknown' };
}

export interface NginxCache {
  readonly launched: Launched;
  readonly url: string;
  /** The worker processes: the ones whose CPU counts. */
  workerPids(): number[];
}

export async function startNginxCache(
  nginxPath: string,
  options: { dir: string; originUrl: string; cpu?: number },
): Promise<NginxCache> {
  mkdirSync(join(options.dir, 'cache'), { recursive: true });
  const port = await freePort();
  const config = join(options.dir, 'nginx.conf');
  writeFileSync(
    config,
    renderNginxConfig(readFileSync(NGINX_TEMPLATE, 'utf8'), {
      dir: options.dir,
      port,
      originPort: Number(new URL(options.originUrl).port),
    }),
  );
  const launched = launch('nginx', nginxPath, ['-p', options.dir, '-c', config], {
    env: { PATH: process.env.PATH ?? '' },
    ...(options.cpu !== undefined && { cpu: options.cpu }),
    stdout: 'pipe',
  });
  const url = `http://127.0.0.1:${String(port)}`;
  const workerPids = (): number[] =>
    childPids(launched.pid).filter((pid) => commandLine(pid).includes('worker process'));
  const deadline = Date.now() + 10_000;
  for (;;) {
    if (launched.hasExited())
      throw new Error(`nginx exited at start: ${launched.errors().slice(-800)} ${readLog(options.dir)}`);
    const ready = await fetch(`${url}/`).then(
      async (response) => {
        await response.arrayBuffer();
        return true;
      },
      () => false,
    );
    if (ready && workerPids().length > 0) break;
    if (Date.now() > deadline) throw new Error(`nginx did not answer on ${url}: ${readLog(options.dir)}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { launched, url, workerPids };
}

function readLog(dir: string): string {
  try {
    return readFileSync(join(dir, 'error.log'), 'utf8').slice(-800);
  } catch {
    return '';
  }
}

/** Fetches every path until nginx answers it from its cache; fails on a page that never becomes a HIT. */
export async function warmNginx(url: string, paths: readonly string[]): Promise<void> {
  for (const path of paths) {
    let status = '';
    for (let attempt = 0; attempt < 3 && status !== 'HIT'; attempt++)
      status = (await get(`${url}${path}`)).headers.get('x-cache-status') ?? '';
    if (status !== 'HIT')
      throw new Error(`nginx does not answer ${path} from its cache (X-Cache-Status: ${status || 'none'})`);
  }
}
