/**
 * `npm run config:check FILE`: checks a config file exactly as the start reads `CONFIG_FILE`
 * (YAML, merged over the built-in defaults, the strict schema). Prints `ok` and exits 0, or prints
 * the start's own message naming the key and exits 2, as `npm start` would with that file.
 */
import { ConfigError, loadConfigFile } from '../config/load.js';

const [file, ...extra] = process.argv.slice(2);
if (file === undefined || extra.length > 0) {
  process.stderr.write('usage: npm run config:check FILE\n');
  process.exit(2);
}
try {
  loadConfigFile(file);
  process.stdout.write('ok\n');
} catch (error) {
  if (!(error instanceof ConfigError)) throw error;
  process.stderr.write(`slab-ops-proxy: configuration error: ${error.message}\n`);
  process.exit(2);
}
