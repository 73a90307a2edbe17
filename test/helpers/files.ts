import { readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** The files under `dir`, at any depth, whose names end in `suffix` (`''`: all of them). */
export function filesUnder(dir: string, suffix: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) out.push(...filesUnder(path, suffix));
    else if (name.endsWith(suffix)) out.push(path);
  }
  return out;
}
