/** The sandbox's answers are small JSON objects (docs/sandbox.md; the seed leaves error bodies open). */
import type { ServerResponse } from 'node:http';

/** Answers `value` as JSON with `status` and any extra headers; HEAD gets the headers alone. */
export function json(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const body = Buffer.from(JSON.stringify(value));
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': body.length, ...headers });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}
