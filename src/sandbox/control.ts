/**
 * The sandbox's control API under `/__sandbox/` (docs/sandbox.md, `SANDBOX_CONTROL=1`, tests only):
 * its counters and the requests it received, a reset, the fault switch, refusals, the rate limit,
 * the validators, and live mode (its rules, a change made now, the change log). A body it cannot
 * take is a 400 naming what was wrong.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ArrivalRecorder } from './arrivals.js';
import { ChangeWebhook, type WebhookTarget } from './change-webhook.js';
import { FaultError, type FaultSwitch, parseFaults } from './faults.js';
import { json } from './json.js';
import type { LiveDataset } from './live.js';
import { CHANGE_KINDS, type ChangeKind, isJsonObject, LiveRuleError, parseLiveRules } from './live-rules.js';
import type { RateLimitSwitch } from './rate-limit.js';
import type { RequestLog } from './request-log.js';
import { SEED_RESOURCES, seedResource } from './resources.js';
import { parseValidatorSettings, type Representations, ValidatorError } from './validators.js';

export const CONTROL_PREFIX = '/__sandbox/';

/** What the control API reads and switches. */
export interface ControlTargets {
  readonly arrivals: ArrivalRecorder;
  readonly requests: RequestLog;
  readonly faults: FaultSwitch;
  readonly rateLimit: RateLimitSwitch;
  readonly representations: Representations;
  readonly live: LiveDataset;
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
  if (action.startsWith('live') || action.startsWith('changes')) return routeLive(req, res, action, targets.live);
  json(res, 404, { error: 'not_found' });
}

/** What live mode answers: `{running, startedAt, rules, changes, webhook}` (the webhook's token never). */
function liveStatus(live: LiveDataset): unknown {
  return {
    running: live.running,
    startedAt: live.startedAt ?? null,
    rules: live.rules,
    changes: live.log.size,
    webhook: live.webhook?.status() ?? null,
  };
}

/** `webhook` of a live mode body: `{url, token}` (an http(s) URL), `null` to send nowhere; absent: unchanged. */
function webhookOf(body: unknown): WebhookTarget | null | undefined {
  if (!isJsonObject(body) || body.webhook === undefined) return undefined;
  const webhook = body.webhook;
  if (webhook === null) return null;
  if (!isJsonObject(webhook) || typeof webhook.url !== 'string' || typeof webhook.token !== 'string')
    throw new LiveRuleError('webhook: {"url": "http://…", "token": "…"} or null');
  if (!/^https?:\/\//.test(webhook.url) || !URL.canParse(webhook.url))
    throw new LiveRuleError('webhook.url: an http(s) URL');
  return { url: webhook.url, token: webhook.token };
}

/** Live mode's routes: `live` (GET, PUT to start, DELETE to stop) and `changes` (GET the log, POST one now). */
async function routeLive(req: IncomingMessage, res: ServerResponse, action: string, live: LiveDataset): Promise<void> {
  const url = new URL(action, 'http://sandbox/');
  const method = req.method;
  if (url.pathname === '/live' && method === 'GET') return json(res, 200, liveStatus(live));
  if (url.pathname === '/live' && method === 'PUT') {
    const body = await readJson(req);
    const webhook = webhookOf(body);
    const { webhook: _webhook, ...rulesBody } = isJsonObject(body) ? body : {};
    const rules = parseLiveRules(
      rulesBody,
      SEED_RESOURCES.map((r) => r.name),
    );
    if (webhook !== undefined) live.webhook = webhook === null ? undefined : new ChangeWebhook(webhook);
    const seed = typeof body === 'object' && body !== null && 'seed' in body ? Number(body.seed) : 1;
    live.start(rules, Number.isInteger(seed) ? seed : 1);
    return json(res, 200, liveStatus(live));
  }
  if (url.pathname === '/live' && method === 'DELETE') {
    live.stop();
    return json(res, 200, liveStatus(live));
  }
  if (url.pathname === '/changes' && method === 'GET') return json(res, 200, { changes: listChanges(url, live) });
  if (url.pathname === '/changes' && method === 'POST') return changeNow(req, res, live);
  json(res, 404, { error: 'not_found' });
}

/** `?since=<ms>&company=&resource=&limit=` (default: every change, at most 10,000). */
function listChanges(url: URL, live: LiveDataset): unknown {
  const since = Number(url.searchParams.get('since') ?? 0);
  const limit = Number(url.searchParams.get('limit') ?? 10_000);
  if (!Number.isFinite(since) || !Number.isInteger(limit) || limit < 1)
    throw new LiveRuleError('since and limit must be numbers');
  const company = url.searchParams.get('company') ?? undefined;
  const resource = url.searchParams.get('resource') ?? undefined;
  return live.log.list({
    since,
    limit,
    ...(company !== undefined && { company }),
    ...(resource !== undefined && { resource }),
  });
}

/** `{resource, kind, id}` (update, move) or `{resource, kind: "append", company}`: one change now. */
async function changeNow(req: IncomingMessage, res: ServerResponse, live: LiveDataset): Promise<void> {
  const body = await readJson(req);
  const fields = isJsonObject(body) ? body : {};
  const resource = seedResource(String(fields.resource));
  if (resource === undefined) throw new LiveRuleError('resource: no such resource');
  const kind = CHANGE_KINDS.find((known) => known === fields.kind);
  if (kind === undefined) throw new LiveRuleError('kind: update, move or append');
  const target = kind === 'append' ? fields.company : fields.id;
  if (typeof target !== 'number' && typeof target !== 'string')
    throw new LiveRuleError(kind === 'append' ? 'company: a company id' : 'id: a record id');
  const change = live.change(
    resource.name,
    kind satisfies ChangeKind,
    kind === 'append' ? String(target) : Number(target),
  );
  if (change === undefined) return json(res, 404, { error: 'not_found' });
  json(res, 201, change);
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
    const known = error instanceof FaultError || error instanceof ValidatorError || error instanceof LiveRuleError;
    json(res, 400, { error: known ? error.message : 'bad request' });
  }
}
