/**
 * The documentation's tables rendered from the catalog and the error registry, so the docs cannot
 * drift from the code: the resource and error tables of the client contract (docs/clients.md), and
 * the README's short list of the resources by group. `npm run docs` rewrites them; a test checks
 * they are current.
 */
import { GRAMMAR_DESCRIPTIONS } from '../catalog/grammar.js';
import { API_PREFIX, RESOURCES } from '../catalog/resources.js';
import { ERROR_REGISTRY, type ErrorCode } from '../errors/registry.js';

export function renderResourceTable(): string {
  const rows = RESOURCES.map((r) => {
    const filters = r.filters.map((f) => `\`${f.name}\` (${f.grammar})`).join(', ');
    return `| \`${r.name}\` | ${r.group} | ${filters} | ${r.requiredPermissions.map((p) => `\`${p}\``).join(' + ')} |`;
  });
  const grammars = Object.entries(GRAMMAR_DESCRIPTIONS).map(([name, text]) => `\`${name}\`: ${text}`);
  return [
    `Each resource has a list read \`GET ${API_PREFIX}/<resource>\` and a record read \`GET ${API_PREFIX}/<resource>/<id>\` (HEAD too).`,
    '',
    '| resource | group | filters | permissions |',
    '|---|---|---|---|',
    ...rows,
    '',
    `Filter grammars: ${grammars.join('; ')}. Every list also takes \`per_page\` (1-100, default 30) and \`after_id\` (0 or a positive integer).`,
  ].join('\n');
}

/** The resources by group, one row per group and permission: the README's short form of the table. */
export function renderResourceGroups(): string {
  const rows = new Map<string, { group: string; names: string[]; permissions: readonly string[] }>();
  for (const r of RESOURCES) {
    const key = `${r.group}\n${r.requiredPermissions.join(' ')}`;
    const row = rows.get(key) ?? { group: r.group, names: [], permissions: r.requiredPermissions };
    row.names.push(`\`${r.name}\``);
    rows.set(key, row);
  }
  return [
    '| group | resources | permissions |',
    '|---|---|---|',
    ...[...rows.values()].map(
      (row) => `| ${row.group} | ${row.names.join(', ')} | ${row.permissions.map((p) => `\`${p}\``).join(' + ')} |`,
    ),
  ].join('\n');
}

export function renderErrorTable(): string {
  const rows = (Object.entries(ERROR_REGISTRY) as Array<[ErrorCode, { status: number; title: string }]>).map(
    ([code, { status, title }]) => `| ${status} | \`${code}\` | ${title} |`,
  );
  return ['| status | code | title |', '|---|---|---|', ...rows].join('\n');
}

/** The documents that hold generated tables, and each table's marker name and renderer. */
export const GENERATED_TABLES: Readonly<Record<string, Readonly<Record<string, () => string>>>> = {
  'README.md': { 'resource-groups': renderResourceGroups },
  'docs/clients.md': { resources: renderResourceTable, errors: renderErrorTable },
};

/** Replaces the text between `<!-- name:start -->` and `<!-- name:end -->`. */
export function replaceSection(document: string, name: string, content: string, file = 'the document'): string {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const from = document.indexOf(start);
  const to = document.indexOf(end);
  if (from === -1 || to === -1 || to < from) throw new Error(`${file} has no ${name} section`);
  return `${document.slice(0, from + start.length)}\n${content}\n${document.slice(to)}`;
}

/** A document with each of its generated tables (`GENERATED_TABLES[file]`) rendered afresh. */
export function renderTables(file: string, document: string): string {
  const tables = GENERATED_TABLES[file];
  if (tables === undefined) throw new Error(`${file} holds no generated tables`);
  return Object.entries(tables).reduce((text, [name, render]) => replaceSection(text, name, render(), file), document);
}
