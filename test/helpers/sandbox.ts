/**
 * The sandbox system of record in-process on a free port (with its test-only control), and what it
 * counts for a client target. Apart from env.ts, which re-exports them, so that the suites that run
 * the proxy as processes do not load the proxy's own modules into the test process (some 2 s of
 * imports a file).
 */
import type { KeySourceOptions } from '../../src/auth/key-source.js';
import { DEV_SECRET } from '../../src/cli/dev-credentials.js';
import { ProxyError } from '../../src/errors/proxy-error.js';
import { createSandbox, type Sandbox, type SandboxOptions } from '../../src/sandbox/server.js';
import { canonicaliseTarget } from './canonicalise.js';

export const DEV_KEYS: KeySourceOptions = { kind: 'secret', secret: DEV_SECRET };

export async function startSandbox(options: Partial<SandboxOptions> = {}): Promise<Sandbox> {
  const sandbox = createSandbox({ keys: DEV_KEYS, control: true, rateLimitPerSecond: 0, ...options });
  await sandbox.listen(0, '127.0.0.1');
  return sandbox;
}

/** The target the proxy forwards for a client target: what the sandbox counts in `byTarget`. */
export function upstreamTarget(target: string): string {
  const read = canonicaliseTarget(target);
  if (read instanceof ProxyError) throw new Error(`not a cacheable read: ${target}`);
  return read.upstreamTarget;
}

/** Upstream requests the sandbox received for a client target (under its canonical form). */
export function upstreamCount(sandbox: Sandbox, target: string): number {
  return sandbox.stats().byTarget[upstreamTarget(target)] ?? 0;
}
