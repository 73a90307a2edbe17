/**
 * Unknown fields in Kubernetes manifests. The API's OpenAPI schemas (and validators built from
 * them) leave `additionalProperties` open, so a misspelt field (`livenessProbes`) validates there
 * and is dropped by the API server unless it validates strictly. TypeScript's excess-property
 * check against `kubernetes-types` (the Kubernetes API types, generated from the same definitions)
 * refuses such a field at any depth: each manifest becomes an object literal that must satisfy its
 * kind's type, and `tsc` judges the file.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

export interface KubernetesObject {
  readonly apiVersion: string;
  readonly kind: string;
}

/** `kubernetes-types` names its modules by group (`core` for the legacy group) and version. */
function typesModule(apiVersion: string): string {
  const [group, version] = apiVersion.includes('/') ? apiVersion.split('/') : ['core', apiVersion];
  return `kubernetes-types/${(group ?? '').split('.')[0] ?? ''}/${version ?? ''}.js`;
}

/** The compiler's complaints about the manifests, one per line; empty when every field is known. */
export function unknownFieldErrors(manifests: readonly KubernetesObject[]): string {
  // Under node_modules, so that `kubernetes-types` resolves; a directory of its own per call.
  const cache = join('node_modules', '.cache', 'slab-ops-proxy');
  mkdirSync(cache, { recursive: true });
  const directory = mkdtempSync(join(cache, 'manifests-'));
  const file = join(directory, 'manifests.ts');
  const lines = manifests.map((manifest, index) => {
    const alias = `K${String(index)}`;
    return `import type { ${manifest.kind} as ${alias} } from '${typesModule(manifest.apiVersion)}';\nexport const m${String(index)} = ${JSON.stringify(manifest)} satisfies ${alias};`;
  });
  writeFileSync(file, `${lines.join('\n')}\n`);
  try {
    execFileSync(
      process.execPath,
      [
        'node_modules/typescript/bin/tsc',
        '--ignoreConfig',
        '--noEmit',
        '--strict',
        '--target',
        'ES2022',
        '--module',
        'NodeNext',
        '--moduleResolution',
        'NodeNext',
        '--types',
        '',
        file,
      ],
      { encoding: 'utf8', stdio: 'pipe' },
    );
    return '';
  } catch (error) {
    const output =
      typeof error === 'object' && error !== null && 'stdout' in error ? String(error.stdout) : String(error);
    return output.trim() === '' ? String(error) : output.trim();
  } finally {
    rmSync(directory, { recursive: true, force: true });
  }
}
