/**
 * The benchmark's baseline: the fastest answer Node gives on this machine. A bare `node:http`
 * server that looks the request target up in a map of precomputed page bytes and writes them with
 * two headers: no parsing of the query, no auth, no log (docs/benchmarks.md).
 *
 * It also serves as the origin of the bench's nginx anchor: `GET /__baseline/served` answers how
 * many pages it has served (checked only once a path is not a page, so the hit path pays nothing),
 * which shows that nginx's rounds were all cache hits.
 *
 * Settings: BASELINE_PAGES (a JSON file: `{"<path?query>": "<body, base64>", …}`), BASELINE_PORT
 * (0: any free port), BASELINE_HOST (127.0.0.1). Prints `baseline listening on <port>` when ready.
 */
import { readFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';

function loadPages(file: string): Map<string, Buffer> {
  const parsed: unknown = JSON.parse(readFileSync(file, 'utf8'));
  if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed))
    throw new Error('BASELINE_PAGES must hold a JSON object');
  const pages = new Map<string, Buffer>();
  for (const [path, body] of Object.entries(parsed)) {
    if (typeof body !== 'string') throw new Error(`BASELINE_PAGES: the body of ${path} is not a base64 string`);
    pages.set(path, Buffer.from(body, 'base64'));
  }
  return pages;
}

/** Answers how many pages this server has served. */
export const SERVED_PATH = '/__baseline/served';
const NOT_FOUND = Buffer.from('{"error":"not_found"}');

function main(file: string): void {
  const pages = loadPages(file);
  let served = 0;
  const server = createServer({ keepAliveTimeout: 65_000 }, (req, res) => {
    const body = pages.get(req.url ?? '');
    if (body === undefined) {
      if (req.url === SERVED_PATH) {
        res.writeHead(200, { 'content-type': 'application/json', 'cache-control': 'no-store' });
        res.end(JSON.stringify({ served }));
        return;
      }
      res.writeHead(404, { 'content-type': 'application/json', 'content-length': NOT_FOUND.length });
      res.end(NOT_FOUND);
      return;
    }
    served += 1;
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
    res.end(body);
  });

  server.listen(Number(process.env.BASELINE_PORT ?? '0'), process.env.BASELINE_HOST ?? '127.0.0.1', () => {
    process.stdout.write(`baseline listening on ${(server.address() as AddressInfo).port} (${pages.size} pages)\n`);
  });

  const stop = (): void => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const file = process.env.BASELINE_PAGES;
  if (file === undefined || file === '') {
    process.stderr.write('baseline-server: set BASELINE_PAGES to a JSON file of pages\n');
    process.exit(2);
  }
  main(file);
}
