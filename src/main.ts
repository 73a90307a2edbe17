/**
 * `npm start`. With nothing set it runs the embedded default (README, "Two commands on a fresh machine"): the bundled sandbox
 * upstream in-process on a loopback port, a development key, and a printed token and `curl` line.
 * With `UPSTREAM_URL` set it needs a real key source and says which variables to set.
 */
import { parseArgs } from 'node:util';
import type { Logger } from 'pino';
import { createProxyApp, type ProxyApp } from './app.js';
import type { KeySourceOptions } from './auth/key-source.js';
import { type Command, parseCommandLine, STANDARD_OPTIONS, USAGE_EXIT_CODE } from './cli/command-line.js';
import { DEV_SECRET, mintDevToken } from './cli/dev-credentials.js';
import { bannerLines, startFacts } from './cli/start-banner.js';
import { type Config, ConfigError, DEFAULT_CONFIG_FILE, loadConfig, shutdownPlan } from './config/load.js';
import { messageOf } from './errors/proxy-error.js';
import { createLogger, errorFields } from './observability/logger.js';
import { startTracing, type TracingRuntime } from './observability/tracing-sdk.js';
import { createSandbox, type Sandbox } from './sandbox/server.js';

const KEY_VARIABLES = 'JWT_JWKS_URL, JWT_PUBLIC_KEY, JWT_PUBLIC_KEY_FILE or JWT_SECRET';

function keysFrom(config: Config): KeySourceOptions | undefined {
  const source = config.env.keySource;
  if (source === undefined) return undefined;
  const algorithms = config.env.jwtAlgorithms === undefined ? {} : { algorithms: config.env.jwtAlgorithms };
  return { ...source, ...algorithms };
}

const PROXY_COMMAND: Command = {
  name: 'slab-ops-proxy',
  usage: [
    'usage: node dist/main.js [--help] [--version]      (npm start builds, then runs this)',
    '',
    'Runs slab-ops-proxy: the caching read proxy on PORT and its admin port on ADMIN_PORT. It takes no',
    'arguments; the environment and the config file set everything (docs/configuration.md):',
    '  PORT (8080), HOST (0.0.0.0)            the client port and its bind address',
    '  ADMIN_PORT (9090)                      /healthz, /readyz, /metrics',
    '  ADMIN_TOKEN                            enables the operator API (/admin/*) behind this bearer token',
    '  INVALIDATE_TOKEN, INVALIDATE_TOKEN_FILE',
    '                                         tokens that may only POST /admin/cache/invalidate (a change feed);',
    '                                         the file holds one a line, re-read on SIGHUP and when it changes',
    '  UPSTREAM_URL                           the system of record; unset: the embedded sandbox',
    '  JWT_JWKS_URL | JWT_PUBLIC_KEY | JWT_PUBLIC_KEY_FILE | JWT_SECRET',
    '                                         the token key source: exactly one, required with UPSTREAM_URL',
    '  JWT_ALGORITHMS, JWT_ISSUER, JWT_AUDIENCE',
    '  REDIS_URL | REDIS_CLUSTER_NODES        the shared cache; unset: in-process, one replica',
    '  CONTROL_REDIS_URL                      a persistent Redis for the operator state; unset: the one above',
    '  SHUTDOWN_DELAY_SECONDS (0), DRAIN_SECONDS (10)',
    '                                         after SIGTERM: unready but serving, then the drain',
    `  CONFIG_FILE                            YAML over the built-in defaults (${DEFAULT_CONFIG_FILE})`,
    '  LOG_LEVEL (info)                       fatal, error, warn, info, debug, trace or silent',
    '  OTEL_EXPORTER_OTLP_ENDPOINT | OTEL_EXPORTER_OTLP_TRACES_ENDPOINT',
    '                                         OpenTelemetry traces over OTLP/HTTP; unset: no tracing',
    '  OTEL_SERVICE_NAME (slab-ops-proxy), OTEL_TRACES_SAMPLER (parentbased_always_on),',
    '  OTEL_TRACES_SAMPLER_ARG (1.0), OTEL_SDK_DISABLED (true: no tracing)',
    'Signals: SIGTERM or SIGINT drain and stop; SIGHUP reads CONFIG_FILE and INVALIDATE_TOKEN_FILE again.',
    'A bad variable or config file stops the start with exit code 2 and names it.',
  ].join('\n'),
};

function fail(message: string): never {
  process.stderr.write(`slab-ops-proxy: ${message}\n`);
  process.exit(USAGE_EXIT_CODE);
}

function readConfig(): Config {
  try {
    return loadConfig(process.env);
  } catch (error) {
    if (error instanceof ConfigError) fail(`configuration error: ${error.message}`);
    throw error;
  }
}

/** The upstream and its key source: the one configured, or the embedded sandbox on a loopback port. */
async function upstreamOf(
  config: Config,
): Promise<{ readonly upstreamUrl: string; readonly keys: KeySourceOptions; readonly sandbox: Sandbox | undefined }> {
  const keys = keysFrom(config);
  const upstreamUrl = config.env.upstreamUrl;
  if (upstreamUrl !== undefined) {
    if (keys === undefined)
      fail(`UPSTREAM_URL is set, so tokens must be verified with a real key: set ${KEY_VARIABLES}.`);
    return { upstreamUrl, keys, sandbox: undefined };
  }
  const sandboxKeys = keys ?? { kind: 'secret', secret: DEV_SECRET };
  const sandbox = createSandbox({
    keys: sandboxKeys,
    ...(config.env.jwtIssuer !== undefined && { issuer: config.env.jwtIssuer }),
    ...(config.env.jwtAudience !== undefined && { audience: config.env.jwtAudience }),
  });
  return { upstreamUrl: await sandbox.listen(0, '127.0.0.1'), keys: sandboxKeys, sandbox };
}

/** Only with an OTLP endpoint: otherwise the SDK is never loaded (docs/operations.md#tracing). */
async function tracingOf(config: Config, logger: Logger): Promise<TracingRuntime | undefined> {
  if (config.env.tracing === undefined) return undefined;
  try {
    return await startTracing({
      ...config.env.tracing,
      onDiagnostic: (message) => logger.warn({ otel: message }, 'tracing'),
    });
  } catch (error) {
    fail(`cannot start tracing: ${error instanceof Error ? error.message : String(error)}`);
  }
}

async function listen(app: ProxyApp, config: Config, logger: Logger): Promise<Awaited<ReturnType<ProxyApp['listen']>>> {
  try {
    return await app.listen({
      port: config.env.port,
      host: config.env.host,
      adminPort: config.env.adminPort,
      onAdminListening: (adminPort) => logger.info({ adminPort }, 'admin port listening; starting'),
    });
  } catch (error) {
    const code = typeof error === 'object' && error !== null && 'code' in error ? String(error.code) : '';
    fail(
      code === 'EADDRINUSE'
        ? `a port is already in use: set PORT (${config.env.port}) or ADMIN_PORT (${config.env.adminPort})`
        : `cannot listen: ${String(error)}`,
    );
  }
}

/** The embedded default prints a banner with a development token and a `curl` line; else one log line. */
async function announce(
  config: Config,
  logger: Logger,
  facts: ReturnType<typeof startFacts>,
  upstream: Awaited<ReturnType<typeof upstreamOf>>,
): Promise<void> {
  if (upstream.sandbox === undefined) {
    const { url: _url, ...fields } = facts;
    logger.info(fields, 'slab-ops-proxy listening');
    return;
  }
  const { keys } = upstream;
  const token =
    keys.kind === 'secret'
      ? await mintDevToken({
          company: 1,
          secret: keys.secret,
          ...(config.env.jwtIssuer !== undefined && { issuer: config.env.jwtIssuer }),
          ...(config.env.jwtAudience !== undefined && { audience: config.env.jwtAudience }),
        })
      : undefined;
  process.stdout.write(
    `${[
      '',
      ...bannerLines(facts),
      ...(token === undefined
        ? ['mint tokens with your own key: the embedded sandbox verifies them with the key source you set']
        : [
            'development token (company 1, every permission, valid 24 h):',
            `  ${token}`,
            'try:',
            `  curl -s -H 'Authorization: Bearer ${token}' '${facts.url}/api/slab/v1/operations/receipts?per_page=2'`,
          ]),
      '',
    ].join('\n')}\n`,
  );
}

/**
 * SIGTERM and SIGINT: SHUTDOWN_DELAY_SECONDS, then DRAIN_SECONDS; a shutdown still running after
 * both and a margin (a hung close) exits with 1 rather than never. SIGHUP: nginx's reload, the file
 * is read again; a bad one changes nothing and says why. The change feed's token file is read
 * again beside it, whatever the config file holds: an unreadable or empty one keeps the tokens in
 * force and says why (docs/operations.md#the-change-feed).
 */
function handleSignals(
  app: ProxyApp,
  config: Config,
  logger: Logger,
  after: { readonly sandbox: Sandbox | undefined; readonly tracing: TracingRuntime | undefined },
): void {
  const plan = shutdownPlan(config.env);
  let stopping = false;
  const stop = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal, delayMs: plan.delayMs, drainMs: plan.drainMs }, 'shutting down');
    const forced = setTimeout(() => {
      logger.error({ signal }, 'shutdown did not finish in time');
      logger.flush();
      process.exit(1);
    }, plan.limitMs);
    forced.unref();
    void app
      .close({ drainMs: plan.drainMs, delayMs: plan.delayMs })
      .then(() => after.sandbox?.close())
      // The spans of the last requests, exported before the exit (bounded: a collector that is
      // down cannot hold the shutdown).
      .then(() => after.tracing?.shutdown())
      .then(() => {
        logger.info({ signal }, 'stopped');
        logger.flush();
        process.exit(0);
      });
  };
  const reload = (): void => {
    void app.rereadInvalidateTokens();
    let next: Config;
    try {
      next = loadConfig(process.env);
    } catch (error) {
      logger.error(errorFields(error), 'config reload refused; the running settings stay');
      return;
    }
    const needsRestart = app.reload(next.file);
    logger.info({ configFile: next.env.configFile, needsRestart }, 'config reloaded');
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', reload);
}

async function main(): Promise<void> {
  parseCommandLine(PROXY_COMMAND, (args) =>
    parseArgs({ args, options: STANDARD_OPTIONS, strict: true, allowPositionals: false }),
  );
  const config = readConfig();
  const logger = createLogger(config.env.logLevel);
  const upstream = await upstreamOf(config);
  const tracing = await tracingOf(config, logger);
  let app: ProxyApp;
  try {
    app = await createProxyApp({
      upstreamUrl: upstream.upstreamUrl,
      keys: upstream.keys,
      issuer: config.env.jwtIssuer,
      audience: config.env.jwtAudience,
      config: config.file,
      logger,
      redis: {
        url: config.env.redisUrl,
        clusterNodes: config.env.redisClusterNodes,
        controlUrl: config.env.controlRedisUrl,
      },
      adminToken: config.env.adminToken,
      invalidateToken: config.env.invalidateToken,
      invalidateTokenFile: config.env.invalidateTokenFile,
      tracing: tracing?.tracing,
    });
  } catch (error) {
    // The change feed's token file is read here, and a bad one is a bad setting like any other.
    fail(error instanceof ConfigError ? `configuration error: ${error.message}` : `cannot start: ${messageOf(error)}`);
  }
  const ports = await listen(app, config, logger);
  const facts = startFacts({
    env: config.env,
    rawEnv: process.env,
    port: ports.port,
    adminPort: ports.adminPort,
    upstreamUrl: upstream.upstreamUrl,
    embeddedSandbox: upstream.sandbox !== undefined,
    storeKind: app.store.kind,
  });
  await announce(config, logger, facts, upstream);
  // A library that leaks a rejected promise must not stop a proxy that is serving: logged, loudly,
  // instead of Node's default exit.
  process.on('unhandledRejection', (reason) => {
    logger.error(errorFields(reason), 'unhandled rejection');
  });
  handleSignals(app, config, logger, { sandbox: upstream.sandbox, tracing });
}

main().catch((error: unknown) => {
  fail(`failed to start: ${messageOf(error)}`);
});
