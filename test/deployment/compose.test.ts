/**
 * No Docker engine runs on the project's machines, so docker-compose.yml is checked for what can
 * be checked: it parses; it runs the topology (redis, a persistent redis for the operator state,
 * the sandbox, three proxy replicas, a load balancer, the load generator under a profile, a Redis
 * Cluster under another, with its env file); its build targets are stages of
 * the Dockerfile; its commands are files the build produces; the variables it sets are ones the
 * code reads; the balancer and the load generator name every replica on the ports the proxy
 * listens on; it matches `npm run loadtest` (bench/loadtest.ts): the same config file,
 * secret and replica count; and its sandbox can run live, its changes sent to one replica with the
 * replicas' admin token (the freshness phase, bench/loadtest-freshness.ts).
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { LOADTEST_CONFIG_FILE, LOADTEST_REPLICAS, LOADTEST_SECRET } from '../../bench/loadtest.js';
import { loadConfigFile, loadEnv } from '../../src/config/load.js';
import { BUILT_IN_CONFIG } from '../../src/config/schema.js';

interface Service {
  readonly image?: string;
  readonly build?: { readonly context: string; readonly target: string };
  readonly command?: readonly string[];
  readonly environment?: Record<string, string>;
  readonly profiles?: readonly string[];
  readonly depends_on?: Record<string, { condition: string; required?: boolean }>;
  readonly volumes?: readonly string[];
  readonly ports?: readonly string[];
}

const composeText = readFileSync('docker-compose.yml', 'utf8');
const compose = parse(composeText) as { services: Record<string, Service> };
const services = compose.services;
const stages = [...readFileSync('Dockerfile', 'utf8').matchAll(/^FROM \S+ AS (\S+)$/gm)].map((m) => m[1]);
const proxies = Object.keys(services).filter((name) => /^proxy\d+$/.test(name));
/** `${NAME:-default}` or `${NAME-default}` → default. */
const defaulted = (value: string | undefined): string => value?.replace(/^\$\{[A-Z_]+:?-(.*)\}$/, '$1') ?? '';
/** The cluster profile's env file, as compose reads it. */
const clusterEnv = Object.fromEntries(
  readFileSync('deploy/compose/cluster.env', 'utf8')
    .split('\n')
    .filter((line) => /^[A-Z_]+=/.test(line))
    .map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)]),
);
const clusterNodes = Object.keys(services).filter((name) => /^redis-node-\d+$/.test(name));
/** Where the code reads its environment. */
const codeReadingEnv = ['src/config/load.ts', 'src/sandbox/main.ts', 'bench/loadgen.ts']
  .map((f) => readFileSync(f, 'utf8'))
  .join('\n');

describe('docker-compose.yml', () => {
  it('runs the whole topology, the load generator under the `load` profile, a Redis Cluster under `cluster`', () => {
    expect(Object.keys(services).sort()).toEqual(
      [
        'lb',
        'loadgen',
        'proxy1',
        'proxy2',
        'proxy3',
        'redis',
        'redis-cluster-init',
        'redis-control',
        'sandbox',
        ...clusterNodes,
      ].sort(),
    );
    expect(clusterNodes).toHaveLength(6);
    expect(services.loadgen?.profiles).toEqual(['load']);
    for (const name of ['redis-cluster-init', ...clusterNodes]) expect(services[name]?.profiles).toEqual(['cluster']);
    for (const name of ['redis', 'redis-control', 'sandbox', 'lb', ...proxies])
      expect(services[name]?.profiles).toBeUndefined();
  });

  it('keeps the operator state in a Redis that persists every write and never evicts', () => {
    const command = services['redis-control']?.command ?? [];
    expect(command[command.indexOf('--appendonly') + 1]).toBe('yes');
    expect(command[command.indexOf('--appendfsync') + 1]).toBe('always');
    expect(command[command.indexOf('--maxmemory-policy') + 1]).toBe('noeviction');
    expect(services['redis-control']?.volumes?.[0]).toMatch(/^control-data:\/data$/);
    for (const name of proxies)
      expect(services[name]?.environment?.CONTROL_REDIS_URL).toBe('redis://redis-control:6379');
  });

  it('points the replicas at the cluster with its env file, and forms the cluster before they start', () => {
    expect(clusterEnv.REDIS_URL).toBe('');
    expect(clusterEnv.REDIS_CLUSTER_NODES?.split(',')).toEqual(clusterNodes.map((name) => `${name}:6379`));
    // The start reads them exactly as compose hands them over.
    const env = loadEnv({ ...clusterEnv, CONTROL_REDIS_URL: 'redis://redis-control:6379' });
    expect(env.redisUrl).toBeUndefined();
    expect(env.redisClusterNodes).toHaveLength(6);
    for (const name of proxies) {
      expect(services[name]?.environment?.REDIS_CLUSTER_NODES).toBe('${REDIS_CLUSTER_NODES:-}');
      expect(services[name]?.depends_on?.['redis-cluster-init']).toEqual({
        condition: 'service_completed_successfully',
        required: false,
      });
    }
    for (const name of clusterNodes) {
      const command = services[name]?.command ?? [];
      expect(command[command.indexOf('--cluster-enabled') + 1]).toBe('yes');
      expect(command[command.indexOf('--cluster-require-full-coverage') + 1]).toBe('no');
    }
    const init = (services['redis-cluster-init']?.command ?? []).join(' ');
    expect(init).toContain('--cluster-replicas 1');
    for (const name of clusterNodes)
      expect(Object.keys(services['redis-cluster-init']?.depends_on ?? {})).toContain(name);
    expect(init).toContain('redis-node-$$n');
  });

  it('builds Dockerfile stages and runs files the build produces', () => {
    for (const [name, service] of Object.entries(services)) {
      if (service.build !== undefined) expect(stages, name).toContain(service.build.target);
      const script = service.command?.[1];
      if (service.command?.[0] !== 'node' || script === undefined) continue;
      const source = script.startsWith('dist-bench/')
        ? script.replace(/^dist-bench\//, '').replace(/\.js$/, '.ts')
        : script.replace(/^dist\//, 'src/').replace(/\.js$/, '.ts');
      expect(existsSync(source), `${name}: ${source}`).toBe(true);
    }
    // Replicas run the image's own command (the proxy).
    for (const name of proxies) expect(services[name]?.command).toBeUndefined();
    for (const volume of services.lb?.volumes ?? []) expect(existsSync(volume.split(':')[0] ?? '')).toBe(true);
  });

  it('lets Redis evict only keys with an expiry: the operator state (revocations, blocks) has none', () => {
    const command = services.redis?.command ?? [];
    expect(command[command.indexOf('--maxmemory-policy') + 1]).toMatch(/^volatile-/);
  });

  it('sets only variables the code reads', () => {
    for (const [name, service] of Object.entries(services)) {
      if (service.image !== undefined) continue;
      for (const variable of Object.keys(service.environment ?? {})) {
        const read = codeReadingEnv.includes(`'${variable}'`) || codeReadingEnv.includes(`env.${variable}`);
        expect(read, `${name}: ${variable}`).toBe(true);
      }
    }
  });

  it('balances over every replica, on the port the proxy listens on, and the load generator reads every replica’s metrics', () => {
    const nginx = readFileSync('deploy/compose/nginx-lb.conf', 'utf8');
    const upstreams = [...nginx.matchAll(/^\s*server (\S+):(\d+);/gm)].map((m) => `${m[1] ?? ''}:${m[2] ?? ''}`);
    expect(upstreams).toEqual(proxies.map((name) => `${name}:8080`));
    expect(services.loadgen?.environment?.ADMIN_URLS).toBe(proxies.map((name) => `http://${name}:9090`).join(','));
    expect(services.loadgen?.environment?.TARGET_URL).toBe('http://lb:8080');
    for (const name of proxies) expect(services.lb?.depends_on?.[name]?.condition).toBe('service_healthy');
  });

  it('matches `npm run loadtest`: config file, secret, replica count, and the sandbox counters on', () => {
    for (const name of proxies) {
      const env = services[name]?.environment ?? {};
      expect(env.CONFIG_FILE).toBe(LOADTEST_CONFIG_FILE);
      expect(env.UPSTREAM_URL).toBe('http://sandbox:8081');
      expect(defaulted(env.REDIS_URL)).toBe('redis://redis:6379');
      expect(defaulted(env.JWT_SECRET)).toBe(LOADTEST_SECRET);
    }
    expect(defaulted(services.sandbox?.environment?.JWT_SECRET)).toBe(LOADTEST_SECRET);
    expect(defaulted(services.loadgen?.environment?.JWT_SECRET)).toBe(LOADTEST_SECRET);
    expect(services.sandbox?.environment?.SANDBOX_CONTROL).toBe('1');
    expect(proxies).toHaveLength(LOADTEST_REPLICAS);
    const file = parse(readFileSync(LOADTEST_CONFIG_FILE, 'utf8')) as { rateLimit: { replicas: number } };
    expect(file.rateLimit.replicas).toBe(LOADTEST_REPLICAS);
    expect(BUILT_IN_CONFIG.rateLimit.replicas).toBeGreaterThanOrEqual(1);
    // The file is one a replica accepts: the start's own loader, strict schema and all.
    expect(loadConfigFile(LOADTEST_CONFIG_FILE).rateLimit.perCredential.points).toBe(10_000_000);
  });

  it('can run the sandbox live, its changes sent to proxy1 with the replicas’ feed token (else admin token); off unless asked', () => {
    const env = services.sandbox?.environment ?? {};
    // Empty unless set: the sandbox reads an empty setting as none (live mode off, no webhook).
    expect(defaulted(env.SANDBOX_LIVE)).toBe('');
    expect(defaulted(env.SANDBOX_LIVE_WEBHOOK)).toBe('');
    for (const name of proxies) {
      expect(services[name]?.environment?.ADMIN_TOKEN).toBe('${ADMIN_TOKEN:-}');
      expect(services[name]?.environment?.INVALIDATE_TOKEN).toBe('${INVALIDATE_TOKEN:-}');
      // The token that may only invalidate when set, the admin token otherwise (Compose's nested default).
      expect(env.SANDBOX_LIVE_WEBHOOK_TOKEN).toBe('${INVALIDATE_TOKEN:-${ADMIN_TOKEN:-}}');
    }
    // The webhook the file offers is proxy1's admin port, the first the load generator is given.
    const [first] = services.loadgen?.environment?.ADMIN_URLS?.split(',') ?? [];
    expect(composeText).toContain(`SANDBOX_LIVE_WEBHOOK=${first ?? ''}/admin/cache/invalidate`);
    // The freshness phase it names runs in the load generator's image.
    const program = /node (dist-bench\/bench\/loadtest-freshness\.js)/.exec(composeText)?.[1] ?? '';
    expect(existsSync(program.replace(/^dist-bench\//, '').replace(/\.js$/, '.ts'))).toBe(true);
  });
});
