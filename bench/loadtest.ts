/**
 * `npm run loadtest`: the topology of `docker-compose.yml` as local processes, for machines
 * without Docker (DESIGN §10). The same services, the same images' commands, the same config file
 * (`config/loadtest.yaml`) and the same load generator:
 *
 *   redis          redis-server (no persistence) on a free port
 *   sandbox        node dist/sandbox/main.js           (SANDBOX_CONTROL=1: its counters)
 *   proxy1..N      node dist/main.js                   (REDIS_URL, UPSTREAM_URL, CONFIG_FILE)
 *   lb             node dist-bench/bench/balancer.js   (round robin; nginx in docker-compose)
 *   loadgen        bench/loadgen.ts, in this process
 *
 * Settings: LOADTEST_REPLICAS (3, as docker-compose), LOADTEST_SECONDS (10),
 * LOADTEST_CONNECTIONS (32). Everything it started is stopped at the end, also on failure.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { once } from 'node:events';
import { fileURLToPath } from 'node:url';
import { freePort } from '../src/dev/free-port.js';
import { positiveInt, printReport, runLoad } from './loadgen.js';

/** The key the replicas verify with and the load generator signs with (as in docker-compose.yml). */
export const LOADTEST_SECRET = 'loadtest-secret-of-at-least-thirty-two-bytes';
export const LOADTEST_CONFIG_FILE = 'config/loadtest.yaml';
/** As many replicas as docker-compose.yml runs (proxy1..3). */
export const LOADTEST_REPLICAS = 3;

interface Started {
  readonly name: string;
  readonly child: ChildProcess;
}

const started: Started[] = [];
let stopping = false;

/** Starts a process and resolves once its output matches `ready` (rejects if it exits first). */
function start(name: string, command: string, args: readonly string[], env: Record<string, string>, ready: RegExp): Promise<RegExpMatchArray> {
  const child = spawn(command, args, { env: { PATH: process.env.PATH ?? '', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  started.push({ name, child });
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer): void => {
      output += chunk.toString('utf8');
      const match = output.match(ready);
      if (match !== null) {
        child.stdout?.off('data', onData);
        child.stdout?.resume();
        resolve(match);
      }
    };
    child.stdout?.on('data', onData);
    child.stderr?.on('data', (chunk: Buffer) => {
      output += chunk.toString('utf8');
    });
    child.once('error', reject);
    child.once('exit', (code) => reject(new Error(`${name} exited with ${String(code)}: ${output.slice(-400)}`)));
  });
}

async function stopAll(): Promise<void> {
  stopping = true;
  await Promise.all(
    started.reverse().map(async ({ child }) => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = once(child, 'exit');
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5_000);
      await exited;
      clearTimeout(timer);
    }),
  );
}

async function waitReady(adminUrl: string): Promise<void> {
  for (let attempt = 0; attempt < 200; attempt++) {
    try {
      const res = await fetch(`${adminUrl}/readyz`);
      if (res.ok && ((await res.json()) as { redis?: string }).redis === 'ok') return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`${adminUrl}/readyz never reported ready with Redis`);
}

async function main(): Promise<void> {
  const replicas = positiveInt('LOADTEST_REPLICAS', LOADTEST_REPLICAS);
  const seconds = positiveInt('LOADTEST_SECONDS', 10);
  const connections = positiveInt('LOADTEST_CONNECTIONS', 32);

  const redisPort = await freePort();
  await start('redis', 'redis-server', ['--port', String(redisPort), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], {}, /Ready to accept connections/);
  const redisUrl = `redis://127.0.0.1:${String(redisPort)}`;

  const sandboxPort = await freePort();
  await start(
    'sandbox',
    process.execPath,
    ['dist/sandbox/main.js'],
    { SANDBOX_PORT: String(sandboxPort), SANDBOX_HOST: '127.0.0.1', SANDBOX_CONTROL: '1', JWT_SECRET: LOADTEST_SECRET },
    /listening on/,
  );
  const sandboxUrl = `http://127.0.0.1:${String(sandboxPort)}`;

  const proxies: { url: string; adminUrl: string }[] = [];
  for (let i = 0; i < replicas; i++) {
    // Ports chosen here: at LOG_LEVEL=warn a replica does not print them.
    const [port, adminPort] = [await freePort(), await freePort()];
    void start(
      `proxy${String(i + 1)}`,
      process.execPath,
      ['dist/main.js'],
      {
        PORT: String(port),
        ADMIN_PORT: String(adminPort),
        HOST: '127.0.0.1',
        UPSTREAM_URL: sandboxUrl,
        REDIS_URL: redisUrl,
        JWT_SECRET: LOADTEST_SECRET,
        CONFIG_FILE: LOADTEST_CONFIG_FILE,
        LOG_LEVEL: 'warn',
      },
      /$^/,
    ).catch((error: unknown) => {
      if (!stopping) process.stderr.write(`loadtest: ${error instanceof Error ? error.message : String(error)}\n`);
    });
    proxies.push({ url: `http://127.0.0.1:${String(port)}`, adminUrl: `http://127.0.0.1:${String(adminPort)}` });
  }
  for (const proxy of proxies) await waitReady(proxy.adminUrl);

  const lbPort = await freePort();
  await start(
    'lb',
    process.execPath,
    ['dist-bench/bench/balancer.js'],
    { LB_PORT: String(lbPort), LB_HOST: '127.0.0.1', LB_BACKENDS: proxies.map((p) => p.url.replace('http://', '')).join(',') },
    /balancer listening/,
  );

  process.stdout.write(
    [
      `topology: redis ${redisUrl}, sandbox ${sandboxUrl}, ${String(replicas)} replicas (${proxies.map((p) => p.url).join(', ')}), balancer :${String(lbPort)}`,
      '',
    ].join('\n'),
  );
  const result = await runLoad({
    targetUrl: `http://127.0.0.1:${String(lbPort)}`,
    adminUrls: proxies.map((p) => p.adminUrl),
    sandboxUrl,
    secret: LOADTEST_SECRET,
    seconds,
    connections,
  });
  printReport(result, seconds);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main()
    .then(stopAll, async (error: unknown) => {
      process.stderr.write(`loadtest: ${error instanceof Error ? error.message : String(error)}\n`);
      await stopAll();
      process.exitCode = 1;
    })
    .then(() => process.exit());
}
