/**
 * A renderer for the part of kustomize (v5) that `deploy/kubernetes/` uses, so the tests can check
 * what `kubectl apply -k` would apply. No kustomize runs on the npm registry (it is a Go program;
 * kubectl embeds it), and the project's machines have neither, so this reads the same files the
 * same way for: `resources` (files, and directories holding a kustomization), `configMapGenerator`
 * (`files`, `literals`; `behavior` create, replace or merge), kustomize's content-hash name suffix
 * and the rewriting of references to generated ConfigMaps, and `images`. Anything else in a
 * kustomization is refused, so a manifest change that needs more cannot pass unchecked. A fixture
 * rendered by kustomize itself (test/fixtures/kustomize/) holds this renderer to its output.
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parseAllDocuments } from 'yaml';

export type Manifest = Record<string, unknown> & {
  readonly apiVersion: string;
  readonly kind: string;
  metadata: { name: string; [key: string]: unknown };
};

const SUPPORTED_KEYS = new Set(['apiVersion', 'kind', 'resources', 'configMapGenerator', 'images']);

interface Generator {
  readonly name: string;
  readonly behavior?: 'create' | 'replace' | 'merge';
  readonly files?: readonly string[];
  readonly literals?: readonly string[];
}

interface ImageRule {
  readonly name: string;
  readonly newName?: string;
  readonly newTag?: string;
  readonly digest?: string;
}

/** A rendered level: manifests, and the generated ConfigMaps among them by their unhashed names. */
interface Level {
  readonly manifests: Manifest[];
  readonly generated: Map<string, Manifest>;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function readYamlDocuments(file: string): unknown[] {
  return parseAllDocuments(readFileSync(file, 'utf8')).map((document) => {
    if (document.errors.length > 0) throw new Error(`${file}: ${document.errors[0]?.message ?? 'invalid YAML'}`);
    return document.toJS() as unknown;
  });
}

function asManifest(value: unknown, file: string): Manifest {
  if (
    !isObject(value) ||
    typeof value.apiVersion !== 'string' ||
    typeof value.kind !== 'string' ||
    !isObject(value.metadata) ||
    typeof value.metadata.name !== 'string'
  ) {
    throw new Error(`${file}: not a Kubernetes object with apiVersion, kind and metadata.name`);
  }
  return value as Manifest;
}

function kustomizationIn(directory: string): string {
  for (const name of ['kustomization.yaml', 'kustomization.yml', 'Kustomization']) {
    const file = join(directory, name);
    if (existsSync(file)) return file;
  }
  throw new Error(`${directory}: no kustomization`);
}

/** `KEY=VALUE` (a literal) or `key=path` / `path` (a file), split at the first `=`. */
function splitPair(entry: string): readonly [string, string] {
  const at = entry.indexOf('=');
  return at === -1 ? [basename(entry), entry] : [entry.slice(0, at), entry.slice(at + 1)];
}

function generatorData(directory: string, generator: Generator): Record<string, string> {
  const data: Record<string, string> = {};
  for (const literal of generator.literals ?? []) {
    const [key, value] = splitPair(literal);
    if (!literal.includes('=')) throw new Error(`${generator.name}: literal without "=": ${literal}`);
    data[key] = value.replace(/^(["'])(.*)\1$/, '$2');
  }
  for (const entry of generator.files ?? []) {
    const [key, path] = splitPair(entry);
    data[key] = readFileSync(join(directory, path), 'utf8');
  }
  return data;
}

function renderLevel(directory: string): Level {
  const file = kustomizationIn(directory);
  const [kustomization] = readYamlDocuments(file);
  if (!isObject(kustomization)) throw new Error(`${file}: not a mapping`);
  for (const key of Object.keys(kustomization))
    if (!SUPPORTED_KEYS.has(key))
      throw new Error(`${file}: "${key}" is not supported by the test renderer (test/helpers/kustomize.ts)`);

  const manifests: Manifest[] = [];
  const generated = new Map<string, Manifest>();
  for (const resource of (kustomization.resources ?? []) as string[]) {
    const path = join(directory, resource);
    if (statSync(path).isDirectory()) {
      const base = renderLevel(path);
      manifests.push(...base.manifests);
      for (const [name, manifest] of base.generated) generated.set(name, manifest);
    } else {
      manifests.push(...readYamlDocuments(path).map((document) => asManifest(document, path)));
    }
  }
  for (const generator of (kustomization.configMapGenerator ?? []) as Generator[]) {
    const data = generatorData(directory, generator);
    const behavior = generator.behavior ?? 'create';
    const existing = generated.get(generator.name);
    if (behavior === 'create') {
      if (existing !== undefined) throw new Error(`${file}: ConfigMap ${generator.name} is generated twice`);
      const manifest: Manifest = { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: generator.name }, data };
      manifests.push(manifest);
      generated.set(generator.name, manifest);
    } else {
      if (existing === undefined)
        throw new Error(`${file}: ${behavior} of ConfigMap ${generator.name}, which no base generates`);
      existing.data = behavior === 'replace' ? data : { ...(existing.data as Record<string, string>), ...data };
    }
  }
  for (const rule of (kustomization.images ?? []) as ImageRule[]) {
    for (const manifest of manifests)
      for (const container of containersOf(manifest)) container.image = retag(container.image, rule);
  }
  return { manifests, generated };
}

/** The containers (and init containers) of a workload's pod template, or of a Pod. */
function containersOf(manifest: Manifest): Array<Record<string, unknown> & { image: string }> {
  const spec = manifest.spec;
  const podSpec =
    manifest.kind === 'Pod' ? spec : isObject(spec) && isObject(spec.template) ? spec.template.spec : undefined;
  if (!isObject(podSpec)) return [];
  return [...((podSpec.containers ?? []) as unknown[]), ...((podSpec.initContainers ?? []) as unknown[])].filter(
    (c): c is Record<string, unknown> & { image: string } => isObject(c) && typeof c.image === 'string',
  );
}

/** kustomize's `images` transformer: a container whose image name matches gets the new name, tag or digest. */
function retag(image: string, rule: ImageRule): string {
  const [, name = image, tag, digest] = /^([^@]+?)(?::([^:/@]+))?(?:@(.+))?$/.exec(image) ?? [];
  if (name !== rule.name) return image;
  const newName = rule.newName ?? name;
  if (rule.digest !== undefined) return `${newName}@${rule.digest}`;
  if (rule.newTag !== undefined) return `${newName}:${rule.newTag}`;
  return `${newName}${tag === undefined ? '' : `:${tag}`}${digest === undefined ? '' : `@${digest}`}`;
}

/**
 * Go's `json.Marshal`, which kustomize hashes: object keys sorted, and `<`, `>`, `&`, U+2028,
 * U+2029 and the control characters JSON.stringify writes short (`\b`, `\f`) escaped as `\uXXXX`.
 */
function goJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(goJson).join(',')}]`;
  if (isObject(value)) {
    return `{${Object.keys(value)
      .sort()
      .map((key) => `${goJson(key)}:${goJson(value[key])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value).replace(/[<>&\u2028\u2029]|\\[bf]/g, (match) => {
    if (match === '\\b') return '\\u0008';
    if (match === '\\f') return '\\u000c';
    return `\\u${match.charCodeAt(0).toString(16).padStart(4, '0')}`;
  });
}

/**
 * kustomize's name suffix for a generated ConfigMap (api/hasher): the SHA-256 of the JSON of
 * `{kind, name, data}`, of which the first ten hex digits are kept with `0 1 3 a e` spelled
 * `g h k m t` (so that the suffix never reads as a word or a number). The name is hashed as ""
 * there: its lookup of `metadata/name` takes the path as one field name and finds nothing. So a
 * ConfigMap's suffix depends on its data alone, which the fixture rendered by kustomize confirms.
 */
export function configMapHash(data: Readonly<Record<string, string>>): string {
  const hex = createHash('sha256')
    .update(goJson({ kind: 'ConfigMap', name: '', data }))
    .digest('hex');
  const spelled: Record<string, string> = { '0': 'g', '1': 'h', '3': 'k', a: 'm', e: 't' };
  return [...hex.slice(0, 10)].map((c) => spelled[c] ?? c).join('');
}

/** Where a pod spec names a ConfigMap: volumes, `envFrom`, and `env[].valueFrom`. */
function renameConfigMapReferences(manifest: Manifest, names: ReadonlyMap<string, string>): void {
  const spec = manifest.spec;
  const podSpec =
    manifest.kind === 'Pod' ? spec : isObject(spec) && isObject(spec.template) ? spec.template.spec : undefined;
  if (!isObject(podSpec)) return;
  const rename = (holder: unknown): void => {
    if (isObject(holder) && typeof holder.name === 'string') holder.name = names.get(holder.name) ?? holder.name;
  };
  for (const volume of (podSpec.volumes ?? []) as unknown[]) if (isObject(volume)) rename(volume.configMap);
  for (const container of [
    ...((podSpec.containers ?? []) as unknown[]),
    ...((podSpec.initContainers ?? []) as unknown[]),
  ]) {
    if (!isObject(container)) continue;
    for (const source of (container.envFrom ?? []) as unknown[]) if (isObject(source)) rename(source.configMapRef);
    for (const variable of (container.env ?? []) as unknown[])
      if (isObject(variable) && isObject(variable.valueFrom)) rename(variable.valueFrom.configMapKeyRef);
  }
}

/** Renders the kustomization in `directory` as `kubectl kustomize` would (for the supported part). */
export function renderKustomization(directory: string): Manifest[] {
  const { manifests, generated } = renderLevel(directory);
  const names = new Map<string, string>();
  for (const [name, manifest] of generated) {
    const hashed = `${name}-${configMapHash(manifest.data as Record<string, string>)}`;
    manifest.metadata.name = hashed;
    names.set(name, hashed);
  }
  for (const manifest of manifests) renameConfigMapReferences(manifest, names);
  return manifests;
}
