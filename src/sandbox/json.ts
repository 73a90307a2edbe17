/** The sandbox's answers are small JSON objects (docs/sandbox.md; the seed leaves error bodies open). */
import type { ServerResponse } from 'node:http';

/** Answers `value` as JSON with `status` and any extra headers; HEAD gets the headers alone. */
export function json(res: ServerResponse, status: number, value: unknown, headers: Record<string, string> = {}): void {
  const body = Buffer.from(JSON.stringify(value));
  // Set apart, so that what the answer promised can be read back (`getHeader`) when it is counted.
  res.setHeader('content-length', body.length);
  res.writeHead(status, { 'content-type': 'application/json', ...headers });
  res.end(res.req.method === 'HEAD' ? undefined : body);
}
