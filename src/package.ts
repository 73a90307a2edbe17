/**
 * Files that ship with the package (`package.json`, `config/default.yaml`), found from this
 * module's own location — `dist/package.js` when installed, `src/package.ts` under the tests — and
 * never from the working directory, so `node /opt/slab-ops-proxy/dist/main.js` works from anywhere.
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const PACKAGE_ROOT = new URL('../', import.meta.url);

/** The absolute path of a file of the package, given relative to its root. */
export function packageFile(relative: string): string {
  return fileURLToPath(new URL(relative, PACKAGE_ROOT));
}

/** The package's version, from its `package.json`. */
export function packageVersion(): string {
  const manifest: unknown = JSON.parse(readFileSync(packageFile('package.json'), 'utf8'));
  const version = typeof manifest === 'object' && manifest !== null && 'version' in manifest ? manifest.version : undefined;
  if (typeof version !== 'string') throw new Error('package.json has no version');
  return version;
}
