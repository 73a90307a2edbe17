/**
 * No Docker engine runs on the project's machines, so docker-compose.yml is checked for what can
 * be checked: it parses; it runs the topology of DESIGN §10 (redis, the sandbox, three proxy
 * replicas, a load balancer, the load generator under a profile); its build targets are stages of
 * the Dockerfile; its commands are files the build produces; the variables it sets are ones the
 * code reads; the balancer and the load generator name every replica on the ports the proxy
 * listens on; and it matches `npm run loadtest` (bench/loadtest.ts): the same config file,
 * secret and replica count.
 */
import { existsSync, readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { LOADTEST_CONFIG_FILE, LOADTEST_REPLICAS, LOADTEST_SECRET } from '../../bench/loadtest.js';
import { loadConfigFile } from '../../src/config/load.js';
import { BUILT_IN_CONFIG } from '../../src/config/schema.js';

interface Service {
  readonly image?: string;
  readonly build?: { readonly context: string; readonly target: string };
  readonly command?: readonly string[];
  readonly environment?: Record<string, string>;
  readonly profiles?: readonly string[];
  readonly depends_on?: Record<string, { condition: string }>;
  readonly volumes?: readonly string[];
  readonly ports?: readonly string[];
}

const compose = parse(readFileSync('docker-compose.yml', 'utf8')) as { services: Record<string, Service> };
const services = compose.services;
const stages = [...readFileSync('Dockerfile', 'utf8').matchAll(/^FROM \S+ AS (\S+)$/gm)].map((m) => m[1]);
const proxies = Object.keys(services).filter((name) => /^proxy\d+$/.test(name));
/** `${NAME:-default}` → default. */
const defaulted = (value: string | undefined): string => value?.replace(/^\$\{[A-Z_]+:-(.*)\}$/, '$1') ?? '';
/** Where the code reads its environment. */
const codeReadingEnv = ['src/config/load.ts', 'src/sandbox/main.ts', 'bench/loadgen.ts'].map((f) => readFileSync(f, 'utf8')).join('\n');

describe('docker-compose.yml', () => {
  it('runs the whole topology, the load generator under the `load` profile', () => {
    expect(Object.keys(services).sort()).toEqual(['lb', 'loadgen', 'proxy1', 'proxy2', 'proxy3', 'redis', 'sandbox']);
    expect(services.loadgen?.profiles).toEqual(['load']);
    for (const name of ['redis', 'sandbox', 'lb', ...proxies]) expect(services[name]?.profiles).toBeUndefined();
  });

  it('builds Dockerfile stages and runs files the build produces', () => {
    for (const [name, service] of Object.entries(services)) {
      if (service.build !== undefined) expect(stages, name).toContain(service.build.target);
      const script = service.command?.[1];
      if (service.command?.[0] !== 'node' || script === undefined) continue;
      const source = script.startsWith('dist-bench/') ? script.replace(/^dist-bench\//, '').replace(/\.js$/, '.ts') : script.replace(/^dist\//, 'src/').replace(/\.js$/, '.ts');
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
    const nginx = readFileSync('config/nginx-lb.conf', 'utf8');
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
      expect(env.REDIS_URL).toBe('redis://redis:6379');
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
});
