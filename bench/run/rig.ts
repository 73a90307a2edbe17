/**
 * The processes of `npm run bench`, started and stopped: `redis-server`, the sandbox system of
 * record, proxy 1 (server CPU) and proxy 2 (client CPU) as shipped, and with BENCH_BEFORE the
 * proxy of another build; once the pages are warm, the anchors: the bare `node:http` server
 * answering the same page bytes and, where installed, nginx's proxy_cache and HAProxy doing the
 * proxy's job by configuration, both in front of one origin of those bytes. The proxies a single phase needs (allocation, 429, noisy neighbour) start
 * here too, on the same sandbox, Redis and secret.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { mintDevToken } from '../../src/cli/dev-credentials.js';
import { SANDBOX_COMPANIES } from '../../src/sandbox/dataset.js';
import { KEY_PREFIX, NEVER_REFUSING, writeBenchConfig } from '../lib/bench-config.js';
import { envText } from '../lib/env.js';
import { say } from '../lib/format.js';
import { startHaproxyCache, warmHaproxy } from '../lib/haproxy.js';
import { startNginxCache, warmNginx } from '../lib/nginx.js';
import { CLIENT_CPU, type Launched, SERVER_CPU, stop } from '../lib/processes.js';
import type { MeasuredServer } from '../lib/rounds.js';
import {
  expectBytes,
  type ProxyOptions,
  type ProxyProcess,
  shippedNodeFlags,
  startBaseline,
  startProxy,
  startRedisServer,
  startSandbox,
} from '../lib/services.js';
import { tailProbe } from '../lib/tail-probe.js';
import type { AllocationInput } from '../phases/allocation.js';
import type { Page } from '../phases/context.js';
import type { ServerName } from '../phases/hits.js';
import { NEIGHBOUR_BUDGET } from '../phases/noisy-neighbour.js';
import { ONE_POINT, type RateLimitedInput } from '../phases/rate-limited.js';
import type { BenchSetup, HaproxyFound, NginxFound } from './settings.js';

/** What every proxy of the run shares: the sandbox, Redis, the secret, the request log as shipped. */
type SharedProxyOptions = Omit<ProxyOptions, 'name' | 'configFile'>;

interface Server {
  readonly launched: Launched;
  readonly url: string;
}

export interface Rig {
  readonly workDir: string;
  readonly secret: string;
  readonly nodeFlags: readonly string[];
  readonly redis: Awaited<ReturnType<typeof startRedisServer>>;
  readonly sandbox: Server;
  readonly proxyOptions: SharedProxyOptions;
  /** The never-refusing config of proxies 1 and 2 (and of the allocation phase's proxy). */
  readonly configFile: string;
  readonly proxy1: ProxyProcess;
  readonly proxy2: ProxyProcess;
  /** BENCH_BEFORE's proxy, when it is set. */
  readonly before: ProxyProcess | undefined;
  /** `Bearer <token>` for a company's dev token. */
  readonly bearer: (company: string) => string;
}

export interface Anchors {
  /** The warmed pages, path → base64 bytes: what the bare servers answer. */
  readonly pagesFile: string;
  readonly bare: Server;
  /** The origin of nginx and HAProxy (it counts what it serves: their misses); none without either. */
  readonly origin: Server | undefined;
  /** The servers the hit rounds measure; undefined: not running in this run. */
  readonly servers: Readonly<Record<ServerName, MeasuredServer | undefined>> & { readonly bare: MeasuredServer };
}

/** Redis, the sandbox, proxies 1 and 2 (and BENCH_BEFORE's), and a dev token per company. */
export async function startRig({ ctx, nodeFlags, profileDir }: BenchSetup): Promise<Rig> {
  const { workDir } = ctx;
  const secret = randomBytes(48).toString('base64url');
  const redis = await startRedisServer(CLIENT_CPU);
  const sandbox = await startSandbox({ secret, cpu: CLIENT_CPU, rateLimit: 0 });
  const configFile = writeBenchConfig(workDir, 'bench.yaml', NEVER_REFUSING);
  const proxyOptions = { upstreamUrl: sandbox.url, redis, secret, logLevel: 'info' } as const;
  const proxy1 = await startProxy({
    ...proxyOptions,
    name: 'proxy 1',
    configFile,
    cpu: SERVER_CPU,
    nodeFlags: [...nodeFlags, ...(profileDir === undefined ? [] : ['--cpu-prof', `--cpu-prof-dir=${profileDir}`])],
  });
  const proxy2 = await startProxy({ ...proxyOptions, name: 'proxy 2', configFile, cpu: CLIENT_CPU, nodeFlags });
  const before = await startBefore(workDir, proxyOptions, nodeFlags);
  const tokens = new Map<string, string>();
  for (const company of SANDBOX_COMPANIES.map(String)) tokens.set(company, await mintDevToken({ company, secret }));
  const bearer = (company: string): string => `Bearer ${tokens.get(company) ?? ''}`;
  return { workDir, secret, nodeFlags, redis, sandbox, proxyOptions, configFile, proxy1, proxy2, before, bearer };
}

/**
 * The proxy of another build (BENCH_BEFORE), on the server CPU beside this one, with its own key
 * prefix (an earlier entry format must not meet this one's) and the same limits.
 */
export async function startBefore(
  workDir: string,
  proxyOptions: SharedProxyOptions,
  nodeFlags: readonly string[],
  name = 'proxy before',
): Promise<ProxyProcess | undefined> {
  const dir = envText('BENCH_BEFORE');
  if (dir === undefined) return undefined;
  const mainJs = join(resolve(dir), 'dist', 'main.js');
  if (!existsSync(mainJs)) throw new Error(`BENCH_BEFORE: ${mainJs} is missing (build that checkout first)`);
  const node = envText('BENCH_BEFORE_NODE');
  if (node !== undefined && !existsSync(node)) throw new Error(`BENCH_BEFORE_NODE: ${node} is missing`);
  say(
    `before: the proxy of ${dir}${node === undefined ? '' : ` on ${node}`}, as "proxy before", with the key prefix ${KEY_PREFIX}-before`,
  );
  return startProxy({
    ...proxyOptions,
    name,
    configFile: writeBenchConfig(workDir, 'bench-before.yaml', NEVER_REFUSING, `${KEY_PREFIX}-before`),
    cpu: SERVER_CPU,
    nodeFlags,
    mainJs,
    ...(node !== undefined && { node }),
  });
}

/**
 * Every page through a proxy twice (a fill or a read of the store, then a hit), each answer the
 * upstream's bytes, before the upstream is counted: the proxy, measured.
 */
export async function warmProxy(
  name: string,
  proxy: ProxyProcess,
  pages: readonly Page[],
  bearer: (company: string) => string,
): Promise<MeasuredServer> {
  for (let pass = 0; pass < 2; pass++)
    for (const page of pages) {
      const res = await fetch(`${proxy.url}${page.path}`, { headers: { authorization: bearer(page.company) } });
      const body = Buffer.from(await res.arrayBuffer());
      if (res.status !== 200 || !body.equals(page.body))
        throw new Error(`${name}: ${page.path} answered ${String(res.status)} with other bytes`);
    }
  return { url: proxy.url, pids: () => [proxy.launched.pid], probe: tailProbe(`${proxy.adminUrl}/metrics`) };
}

/**
 * The bare server, and nginx and HAProxy where installed, on the warmed pages' bytes, each checked
 * to serve them; BENCH_BEFORE's proxy warmed on the same pages.
 */
export async function startAnchors(
  rig: Rig,
  pages: readonly Page[],
  found: { readonly nginx: NginxFound; readonly haproxy: HaproxyFound },
): Promise<Anchors> {
  const pagesFile = join(rig.workDir, 'pages.json');
  writeFileSync(pagesFile, JSON.stringify(Object.fromEntries(pages.map((p) => [p.path, p.body.toString('base64')]))));
  const firstPage = pages[0];
  if (firstPage === undefined) throw new Error('no pages');
  const bare = await startBaseline('bare node:http', pagesFile, SERVER_CPU);
  await expectBytes('the bare server', `${bare.url}${firstPage.path}`, firstPage.body);

  const origin =
    'missing' in found.nginx && 'missing' in found.haproxy
      ? undefined
      : await startBaseline('anchors origin', pagesFile, CLIENT_CPU);
  const nginx = origin === undefined ? undefined : await startNginx(rig, found.nginx, origin.url, pages);
  const haproxy = origin === undefined ? undefined : await startHaproxy(rig, found.haproxy, origin.url, pages);
  const { proxy1, before } = rig;
  const servers: Anchors['servers'] = {
    bare: { url: bare.url, pids: () => [bare.launched.pid] },
    nginx,
    haproxy,
    proxy: { url: proxy1.url, pids: () => [proxy1.launched.pid], probe: tailProbe(`${proxy1.adminUrl}/metrics`) },
    before: before === undefined ? undefined : await warmProxy('proxy before', before, pages, rig.bearer),
  };
  return { pagesFile, bare, origin, servers };
}

/** nginx's proxy_cache on the origin, warmed and checked, when installed. */
async function startNginx(
  rig: Rig,
  nginx: NginxFound,
  originUrl: string,
  pages: readonly Page[],
): Promise<MeasuredServer | undefined> {
  if ('missing' in nginx) return undefined;
  const cache = await startNginxCache(nginx.path, { dir: join(rig.workDir, 'nginx'), originUrl, cpu: SERVER_CPU });
  await warmNginx(
    cache.url,
    pages.map((p) => p.path),
  );
  await expectPages('nginx', cache.url, pages, rig.bearer);
  return { url: cache.url, pids: cache.workerPids };
}

/** HAProxy doing the proxy's job on the origin, with the proxies' secret, warmed and checked, when installed. */
async function startHaproxy(
  rig: Rig,
  haproxy: HaproxyFound,
  originUrl: string,
  pages: readonly Page[],
): Promise<MeasuredServer | undefined> {
  if ('missing' in haproxy) return undefined;
  const cache = await startHaproxyCache(haproxy.path, {
    dir: join(rig.workDir, 'haproxy'),
    originUrl,
    secret: rig.secret,
    cpu: SERVER_CPU,
  });
  await warmHaproxy(
    cache.url,
    pages.map((p) => ({ path: p.path, authorization: rig.bearer(p.company) })),
  );
  await expectPages('HAProxy', cache.url, pages, rig.bearer);
  return { url: cache.url, pids: () => [cache.launched.pid] };
}

/** Every page answered with its exact bytes, with its company's token. */
async function expectPages(
  name: string,
  url: string,
  pages: readonly Page[],
  bearer: (company: string) => string,
): Promise<void> {
  for (const page of pages) {
    const response = await fetch(`${url}${page.path}`, { headers: { authorization: bearer(page.company) } });
    const body = Buffer.from(await response.arrayBuffer());
    if (response.status !== 200 || !body.equals(page.body))
      throw new Error(`${name}: ${page.path} answered ${String(response.status)} with other bytes`);
  }
}

/** The allocation phase's pages and fresh servers: the bare one, a proxy, and BENCH_BEFORE's, stdout piped. */
export function allocationInput(rig: Rig, anchors: Anchors, pages: readonly Page[]): AllocationInput {
  const { proxyOptions, configFile, nodeFlags, workDir } = rig;
  return {
    pages,
    bearer: rig.bearer,
    startBare: (flags) =>
      startBaseline('bare (allocation)', anchors.pagesFile, SERVER_CPU, [...shippedNodeFlags(), ...flags]),
    startProxy: async (flags) => {
      const server = await startProxy({
        ...proxyOptions,
        name: 'proxy (allocation)',
        configFile,
        cpu: SERVER_CPU,
        nodeFlags: [...nodeFlags, ...flags],
        stdout: 'pipe',
      });
      return { url: server.url, launched: server.launched };
    },
    startBefore:
      rig.before === undefined
        ? undefined
        : async (flags) => {
            const server = await startBefore(
              workDir,
              { ...proxyOptions, stdout: 'pipe' },
              [...nodeFlags, ...flags],
              'proxy before (allocation)',
            );
            if (server === undefined) throw new Error('BENCH_BEFORE: no proxy');
            return { url: server.url, launched: server.launched };
          },
  };
}

/** The 429 phase's Redis, pages and bare server, and its proxy 3: one request an hour per credential. */
export function rateLimitedInput(rig: Rig, anchors: Anchors, pages: readonly Page[]): RateLimitedInput {
  return {
    redisUrl: rig.redis.url,
    secret: rig.secret,
    pages,
    bare: anchors.servers.bare,
    startLimitedProxy: () =>
      startProxy({
        ...rig.proxyOptions,
        name: 'proxy 3 (429)',
        configFile: writeBenchConfig(rig.workDir, 'bench-429.yaml', ONE_POINT),
        cpu: SERVER_CPU,
        nodeFlags: rig.nodeFlags,
      }),
  };
}

/** The noisy-neighbour phase's proxy 4: a small upstream budget, its own key prefix. */
export function startNeighbourProxy(rig: Rig): Promise<ProxyProcess> {
  return startProxy({
    ...rig.proxyOptions,
    name: 'proxy 4 (noisy neighbour)',
    configFile: writeBenchConfig(
      rig.workDir,
      'bench-neighbour.yaml',
      NEVER_REFUSING,
      `${KEY_PREFIX}-neighbour`,
      NEIGHBOUR_BUDGET,
    ),
    cpu: SERVER_CPU,
    nodeFlags: rig.nodeFlags,
  });
}

/**
 * The Redis load phase's proxy 5 (bench/phases/redis-load.ts): every page fresh for an hour, its own
 * key prefix (its own change sequence), warmed on the run's pages.
 */
export async function startRedisLoadProxy(
  rig: Rig,
  pages: readonly Page[],
): Promise<{ readonly proxy: ProxyProcess; readonly keyPrefix: string }> {
  const keyPrefix = `${KEY_PREFIX}-redis-load`;
  const proxy = await startProxy({
    ...rig.proxyOptions,
    name: 'proxy 5 (redis load)',
    configFile: writeBenchConfig(rig.workDir, 'bench-redis-load.yaml', NEVER_REFUSING, keyPrefix, undefined, false),
    cpu: SERVER_CPU,
    nodeFlags: rig.nodeFlags,
  });
  await warmProxy('proxy 5 (redis load)', proxy, pages, rig.bearer);
  return { proxy, keyPrefix };
}

/** Every server but Redis, which the breakdown still reads. */
export async function stopServers(rig: Rig, anchors: Anchors): Promise<void> {
  await Promise.all(
    [
      rig.proxy1.launched,
      rig.proxy2.launched,
      rig.sandbox.launched,
      anchors.bare.launched,
      ...(rig.before === undefined ? [] : [rig.before.launched]),
    ].map((p) => stop(p)),
  );
}
