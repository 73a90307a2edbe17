/** `npm run docs`: rewrites the generated tables of README.md from the catalog and the registry. */
import { readFileSync, writeFileSync } from 'node:fs';
import { renderReadme } from '../catalog/docs.js';

const current = readFileSync('README.md', 'utf8');
const next = renderReadme(current);
if (next !== current) writeFileSync('README.md', next);
process.stdout.write(next === current ? 'README.md is up to date\n' : 'README.md updated\n');
