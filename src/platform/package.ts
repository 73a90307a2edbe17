/**
 * Files that ship with the package (`package.json`, `config/default.yaml`), found from this
 * module's own location — `dist/platform/package.js` when installed, `src/platform/package.ts`
 * under the tests — and never from the working directory, so `node /opt/slab-ops-proxy/dist/main.js`
 * works from anywhere; and the package's version, read once.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const PACKAGE_ROOT = new URL('../../', import.meta.url);

/** The absolute path of a file of the package, given relative to its root. */
export function packageFile(relative: string): string {
  return fileURLToPath(new URL(relative, PACKAGE_ROOT));
}

function readPackageVersion(): string {
  try {
    const manifest: unknown = JSON.parse(readFileSync(packageFile('package.json'), 'utf8'));
    if (
      typeof manifest === 'object' &&
      manifest !== null &&
      'version' in manifest &&
      typeof manifest.version === 'string'
    )
      return manifest.version;
  } catch {
    // A build copied without its package.json still runs; it just cannot say its version.
  }
  return 'unknown';
}

/**
 * The package's version (`--version`, `slab_proxy_build_info`, the OpenAPI description's
 * `info.version`), or `unknown` for a build copied without its package.json.
 */
export const PACKAGE_VERSION = readPackageVersion();
