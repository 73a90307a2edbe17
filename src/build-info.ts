/**
 * What this build is: the package's version, read once from package.json (one level above both
 * `src/` and `dist/`, and beside `dist/` in the image). For `slab_proxy_build_info` and the
 * OpenAPI description's `info.version`.
 */
import { readFileSync } from 'node:fs';

function readPackageVersion(): string {
  try {
    const manifest: unknown = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));
    if (typeof manifest === 'object' && manifest !== null && 'version' in manifest && typeof manifest.version === 'string') return manifest.version;
  } catch {
    // A build copied without its package.json still runs; it just cannot say its version.
  }
  return 'unknown';
}

export const PACKAGE_VERSION = readPackageVersion();
