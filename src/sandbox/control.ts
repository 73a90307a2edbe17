/**
 * The sandbox's control API under `/__sandbox/` (docs/sandbox.md, `SANDBOX_CONTROL=1`, tests only):
 * its counters and the requests it received, a reset, the fault switch, refusals, the rate limit and
 * the validators. A body it cannot take is a 400 naming what was wrong.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ArrivalRecorder } from './arrivals.js';
import { FaultError, type FaultSwitch, parseFaults } from './faults.js';
import { json } from './json.js';
import type { RateLimitSwitch } from './rate-limit.js';
import type { RequestLog } from './request-log.js';
import { parseValidatorSettings, type Representations, ValidatorError } from './validators.js';

export const CONTROL_PREFIX = '/__sandbox/';

/** What the control API reads and switches. */
export interface ControlTargets {
  readonly arrivals: ArrivalRecorder;
  readonly requests: RequestLog;
  readonly faults: FaultSwitch;
  readonly rateLimit: RateLimitSwitch;
  readonly representations: Representations;
  /** Stops listening for `ms` (`Sandbox.refuse`). */
  refuse(ms: number): Promise<void>;
}

/** Bodies are small JSON objects; an empty body is `{}`. */
async function readJson(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > 65_536) throw new FaultError('body too large');
    chunks.push(chunk);
  }
  const text = Buffer.concat(chunks).toString('utf8');
  if (text.trim() === '') return {};
  try {
    return JSON.parse(text) as unknown;
  } catch {
    throw new FaultError('body is not JSON');
  }
}

async function putFaults(req: IncomingMessage, res: ServerResponse, targets: ControlTargets): Promise<void> {
  const parsed = parseFaults(await readJson(req));
  if (parsed.refuseForMs !== undefined) {
    // Answered before it stops listening: the refusal is for the requests after this one.
    json(res, 202, { ok: true });
    void targets.refuse(parsed.refuseForMs);
    return;
  }
  targets.faults.set(parsed);
  json(res, 200, { ok: true });
}

async function putRateLimit(req: IncomingMessage, res: ServerResponse, targets: ControlTargets): Promise<void> {
  const body = await readJson(req);
  const perSecond = typeof body === 'object' && body !== null && 'perSecond' in body ? body.perSecond : undefined;
  if (typeof perSecond !== 'number' || !Number.isInteger(perSecond) || perSecond < 0)
    throw new FaultError('perSecond must be an integer ≥ 0');
  targets.rateLimit.set(perSecond);
  json(res, 200, { ok: true });
}

async function route(
  req: IncomingMessage,
  res: ServerResponse,
  action: string,
  targets: ControlTargets,
): Promise<void> {
  const method = req.method;
  if (action === 'stats' && method === 'GET') return json(res, 200, targets.arrivals);
  if (action === 'requests' && method === 'GET') return json(res, 200, targets.requests.list());
  if (action === 'reset' && method === 'POST') {
    targets.arrivals.reset();
    targets.requests.clear();
    targets.faults.clear();
    return json(res, 200, { ok: true });
  }
  if (action === 'faults' && method === 'PUT') return putFaults(req, res, targets);
  if (action === 'faults' && method === 'DELETE') {
    targets.faults.clear();
    return json(res, 200, { ok: true });
  }
  if (action === 'rate-limit' && method === 'PUT') return putRateLimit(req, res, targets);
  if (action === 'validators' && method === 'GET') return json(res, 200, targets.representations.settings);
  if (action === 'validators' && method === 'PUT') {
    const settings = parseValidatorSettings(await readJson(req), targets.representations.settings);
    targets.representations.set(settings);
    return json(res, 200, settings);
  }
  json(res, 404, { error: 'not_found' });
}

/** Answers `action` (the target after `CONTROL_PREFIX`). */
export async function handleControl(
  req: IncomingMessage,
  res: ServerResponse,
  action: string,
  targets: ControlTargets,
): Promise<void> {
  try {
    await route(req, res, action, targets);
  } catch (error) {
    const known = error instanceof FaultError || error instanceof ValidatorError;
    json(res, 400, { error: known ? error.message : 'bad request' });
  }
}
