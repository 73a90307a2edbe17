/**
 * How an active fault (docs/sandbox.md, `faults.ts`) answers in place of the real answer: after its
 * latency, an error status with a small JSON body, or a corrupted 200.
 */
import type { ServerResponse } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import type { BodyFault, Faults } from './faults.js';
import { json } from './json.js';

function corrupt(res: ServerResponse, fault: BodyFault): void {
  if (fault === 'malformed' || fault === 'not-object') {
    const body = fault === 'malformed' ? '{"data": [' : '[]';
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
  } else {
    // Promise 4 KiB, send a little, then drop the connection: a truncated body.
    res.writeHead(200, { 'content-type': 'application/json', 'content-length': 4096 });
    res.write('{"data": [{"id": 1');
    setImmediate(() => res.socket?.destroy());
  }
}

/**
 * Waits the fault's latency, then answers its status or its corrupted body. Resolves whether it
 * answered: when it did not (latency alone, or no fault), the real answer follows.
 */
export async function answerFault(res: ServerResponse, fault: Faults | undefined): Promise<boolean> {
  if (fault?.latencyMs !== undefined) await delay(fault.latencyMs);
  if (fault?.status !== undefined) {
    json(
      res,
      fault.status,
      { error: `fault_${fault.status}` },
      fault.retryAfter === undefined ? {} : { 'retry-after': fault.retryAfter },
    );
    return true;
  }
  if (fault?.body !== undefined) {
    corrupt(res, fault.body);
    return true;
  }
  return false;
}
