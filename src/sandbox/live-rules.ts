/**
 * The rules of the sandbox's live mode (docs/sandbox.md#live-mode): which records change, how and
 * how often. A rule is `{resource, kind, everyMs, share?, company?}`:
 *
 * - `update`: a field of each chosen record changes (a number of its own, and `updated_at`);
 * - `move`: a chosen record's status (a filter with a vocabulary, or `active`) takes another value,
 *   so that it leaves one filtered list and joins another (falls back to `update` where the resource
 *   has no such filter);
 * - `append`: a new record is added at the end of the company's collection;
 *
 * each chosen record changing once every `everyMs` (for `append`, one new record per company every
 * `everyMs`), or with `timing: "poisson"` (of `update` and `move`) at the times of a Poisson process
 * of that mean interval, each record its own; `share` (0–1, default 1) of the resource's records are chosen, the same ones for a
 * seed; `company` (default every company) narrows a rule to one; `ids` names the records instead
 * (of `update` and `move`): how a workload makes chosen *pages* change, each through one record it
 * shows.
 */
import type { ResourceName } from './resources.js';
import { seedResource } from './resources.js';

export const CHANGE_KINDS = ['update', 'move', 'append'] as const;
export type ChangeKind = (typeof CHANGE_KINDS)[number];

export interface ChangeRule {
  readonly resource: ResourceName;
  readonly kind: ChangeKind;
  readonly everyMs: number;
  readonly share: number;
  readonly company: string | undefined;
  /** The records that change, named; `undefined`: `share` of them, chosen by the seed. */
  readonly ids?: readonly number[] | undefined;
  /** Each record once every `everyMs` (`periodic`, the default), or at exponential intervals of that mean. */
  readonly timing?: 'periodic' | 'poisson' | undefined;
}

export class LiveRuleError extends Error {}

/**
 * The workload of the `mixed` preset: in every resource, 5% of the records change every 3 s and 20%
 * every minute (their statuses too where they have one), the rest never; and a new movement every
 * 5 s in each company.
 */
export function mixedWorkload(resources: readonly ResourceName[]): ChangeRule[] {
  return [
    ...resources.flatMap((resource) => [
      { resource, kind: 'update' as const, everyMs: 3_000, share: 0.05, company: undefined },
      { resource, kind: 'move' as const, everyMs: 60_000, share: 0.2, company: undefined },
    ]),
    { resource: 'movements', kind: 'append', everyMs: 5_000, share: 1, company: undefined },
  ];
}

/** A log's growth: a new movement in every company every 300 ms (only each list's last page changes). */
export function appendWorkload(): ChangeRule[] {
  return [{ resource: 'movements', kind: 'append', everyMs: 300, share: 1, company: undefined }];
}

/**
 * Records changing status: 5% of the movements each move to the next `item_type` every 10 s, so
 * that they leave one filtered list and join another, anywhere in both.
 */
export function moveWorkload(): ChangeRule[] {
  return [{ resource: 'movements', kind: 'move', everyMs: 10_000, share: 0.05, company: undefined }];
}

/** The presets by name: `{"preset": <name>}` or `SANDBOX_LIVE=<name>` (docs/sandbox.md#live-mode). */
export const LIVE_PRESETS = {
  mixed: mixedWorkload,
  append: appendWorkload,
  move: moveWorkload,
} as const satisfies Readonly<Record<string, (resources: readonly ResourceName[]) => ChangeRule[]>>;

export type LivePreset = keyof typeof LIVE_PRESETS;

export function isLivePreset(name: unknown): name is LivePreset {
  return typeof name === 'string' && Object.hasOwn(LIVE_PRESETS, name);
}

/** A JSON object, its members unread. */
export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function field(rule: Record<string, unknown>, name: string): unknown {
  return rule[name];
}

/** One rule from a JSON body, checked. */
function parseRule(input: unknown, index: number): ChangeRule {
  const at = `rules[${String(index)}]`;
  if (!isJsonObject(input)) throw new LiveRuleError(`${at} must be an object`);
  const rule = input;
  for (const key of Object.keys(rule))
    if (!['resource', 'kind', 'everyMs', 'share', 'company', 'ids', 'timing'].includes(key))
      throw new LiveRuleError(`${at}: unknown member ${key}`);
  const resource = seedResource(String(field(rule, 'resource')));
  if (resource === undefined) throw new LiveRuleError(`${at}.resource: no such resource`);
  const kind = CHANGE_KINDS.find((known) => known === field(rule, 'kind'));
  if (kind === undefined) throw new LiveRuleError(`${at}.kind: update, move or append`);
  const everyMs = field(rule, 'everyMs');
  if (typeof everyMs !== 'number' || !Number.isInteger(everyMs) || everyMs < 100 || everyMs > 86_400_000)
    throw new LiveRuleError(`${at}.everyMs: an integer from 100 to 86400000`);
  const share = field(rule, 'share') ?? 1;
  if (typeof share !== 'number' || !(share > 0 && share <= 1))
    throw new LiveRuleError(`${at}.share: above 0, at most 1`);
  const company = field(rule, 'company');
  if (company !== undefined && typeof company !== 'string' && typeof company !== 'number')
    throw new LiveRuleError(`${at}.company: a company id`);
  const ids = field(rule, 'ids');
  if (
    ids !== undefined &&
    (kind === 'append' ||
      !Array.isArray(ids) ||
      ids.length === 0 ||
      ids.length > 10_000 ||
      !ids.every((id) => Number.isSafeInteger(id) && Number(id) > 0))
  )
    throw new LiveRuleError(`${at}.ids: 1 to 10000 record ids, for update or move`);
  const timing = field(rule, 'timing') ?? 'periodic';
  if ((timing !== 'periodic' && timing !== 'poisson') || (timing === 'poisson' && kind === 'append'))
    throw new LiveRuleError(`${at}.timing: periodic or poisson, for update or move`);
  return {
    resource: resource.name,
    kind,
    ...(timing === 'poisson' && { timing }),
    everyMs,
    share,
    company: company === undefined ? undefined : String(company),
    ...(Array.isArray(ids) && { ids: ids.map(Number) }),
  };
}

const LIVE_BODY = 'live mode takes {"rules": [...]} or {"preset": "mixed"|"append"|"move"}';

/** `{"rules": [...]}` or `{"preset": <name>}`, from the control API or `SANDBOX_LIVE`. */
export function parseLiveRules(input: unknown, resources: readonly ResourceName[]): ChangeRule[] {
  if (!isJsonObject(input)) throw new LiveRuleError(LIVE_BODY);
  const body = input;
  if (isLivePreset(body.preset) && body.rules === undefined) return LIVE_PRESETS[body.preset](resources);
  if (!Array.isArray(body.rules) || body.preset !== undefined) throw new LiveRuleError(LIVE_BODY);
  if (body.rules.length > 100) throw new LiveRuleError('at most 100 rules');
  return body.rules.map((rule, index) => parseRule(rule, index));
}
