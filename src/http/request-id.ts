/**
 * `X-Request-Id`: the client's when it is a plausible id, else a new UUID. An unfit client value is
 * replaced, not refused: it is a tracing aid, and it must never carry a log-injection payload.
 */
import { randomUUID } from 'node:crypto';
import type { IncomingMessage } from 'node:http';

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/;

export function requestIdOf(req: IncomingMessage): string {
  const value = req.headers['x-request-id'];
  return typeof value === 'string' && REQUEST_ID.test(value) ? value : randomUUID();
}
