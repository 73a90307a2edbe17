/**
 * The sandbox's live mode (docs/sandbox.md#live-mode): off by default; once started, records of
 * the resources its rules name change at the rules' rates (live-rules.ts) — fields changed, statuses
 * moved from one filtered list to another, records appended at the end of a collection — each
 * change stamped with its time in the log (change-log.ts), so that pages' `ETag` and
 * `Last-Modified` follow them and a reader can judge every answer it got. The data it changes is
 * the sandbox's own copy of the generated dataset: the same seed starts from the same bytes.
 */
import { type Change, ChangeLog } from './change-log.js';
import type { ChangeWebhook } from './change-webhook.js';
import { type Dataset, DOMAIN_FIELDS, prng, SANDBOX_COMPANIES, type SandboxRecord, TEXT_VALUES } from './dataset.js';
import type { ChangeKind, ChangeRule } from './live-rules.js';
import { type ResourceName, SEED_RESOURCES } from './resources.js';

/** How often due changes are made, ms. */
const TICK_MS = 50;
/** Ids of a resource stay within its own hundred thousand (dataset.ts): appends stop short of the next. */
const ID_SPAN = 100_000;

/** A rule's targets and how many changes it owes. */
interface Plan {
  readonly rule: ChangeRule;
  /** Record ids (update, move) or companies (append), changed in turn. */
  readonly targets: ReadonlyArray<number | string>;
  owed: number;
  next: number;
  lastAt: number;
  /** `poisson` timing: when each target changes next (ms), and the draws of its intervals. */
  readonly dueAt?: number[];
  readonly random?: () => number;
}

/** A stable pseudo-random order of ids for a seed (FNV-1a over the seed and the id). */
function rank(seed: number, id: number): number {
  let hash = 0x811c9dc5 ^ seed;
  for (const byte of `${String(seed)}:${String(id)}`) hash = Math.imul(hash ^ (byte.codePointAt(0) ?? 0), 0x01000193);
  return hash >>> 0;
}

export class LiveDataset {
  readonly #records = new Map<ResourceName, SandboxRecord[]>();
  readonly #log = new ChangeLog();
  readonly #now: () => number;
  #plans: Plan[] = [];
  #rules: readonly ChangeRule[] = [];
  #timer: NodeJS.Timeout | undefined;
  #startedAt: number | undefined;
  #webhook: ChangeWebhook | undefined;

  constructor(base: Dataset, now: () => number = Date.now) {
    for (const [resource, records] of base) this.#records.set(resource, [...records]);
    this.#now = now;
  }

  /** The records as they are now (the arrays change in place). */
  get dataset(): Dataset {
    return this.#records;
  }

  get log(): ChangeLog {
    return this.#log;
  }

  /** When live mode last started; `undefined` while it never has. */
  get startedAt(): number | undefined {
    return this.#startedAt;
  }

  get running(): boolean {
    return this.#timer !== undefined;
  }

  get rules(): readonly ChangeRule[] {
    return this.#rules;
  }

  /** Where each change is sent as it is made (change-webhook.ts); `undefined`: nowhere. */
  get webhook(): ChangeWebhook | undefined {
    return this.#webhook;
  }

  /** The webhook replaced stops: it retries nothing more in the background. */
  set webhook(webhook: ChangeWebhook | undefined) {
    if (this.#webhook !== webhook) this.#webhook?.close();
    this.#webhook = webhook;
  }

  /** Starts changing records by `rules` (replacing any running), the targets chosen by `seed`. */
  start(rules: readonly ChangeRule[], seed = 1): void {
    this.stop();
    const at = this.#now();
    this.#rules = rules;
    this.#plans = rules.map((rule) => this.#plan(rule, seed, at));
    for (const plan of this.#plans) this.#backdate(plan, seed, at);
    this.#startedAt = at;
    this.#timer = setInterval(() => this.tick(), TICK_MS);
    this.#timer.unref();
  }

  /** Stops changing records; what changed stays changed. */
  stop(): void {
    if (this.#timer !== undefined) clearInterval(this.#timer);
    this.#timer = undefined;
  }

  /** Makes the changes due by now; returns how many. */
  tick(): number {
    const at = this.#now();
    let made = 0;
    for (const plan of this.#plans) {
      if (plan.dueAt !== undefined) {
        made += this.#poissonTick(plan, plan.dueAt, at);
        continue;
      }
      // At most one round of the targets owed at once: a stalled timer does not make a burst.
      // Each target once every `everyMs`: (elapsed × targets) / everyMs, exact for whole multiples.
      const due = ((at - plan.lastAt) * plan.targets.length) / plan.rule.everyMs;
      plan.owed = Math.min(plan.owed + due, plan.targets.length);
      plan.lastAt = at;
      for (; plan.owed >= 1; plan.owed -= 1) {
        const target = plan.targets[plan.next % plan.targets.length];
        plan.next += 1;
        if (target !== undefined && this.change(plan.rule.resource, plan.rule.kind, target, at) !== undefined)
          made += 1;
      }
    }
    return made;
  }

  /**
   * One change now: of the record `target` (an id) for `update` and `move`, or a record appended to
   * company `target`'s collection; `undefined` when there is no such record or no room for another.
   */
  change(resource: ResourceName, kind: ChangeKind, target: number | string, at = this.#now()): Change | undefined {
    const records = this.#records.get(resource);
    if (records === undefined) return undefined;
    if (kind === 'append') return this.#append(resource, records, String(target), at);
    const index = records.findIndex((record) => record.id === target);
    const before = records[index];
    if (before === undefined) return undefined;
    const after = kind === 'move' ? moved(resource, before, at) : updated(resource, before, at);
    records[index] = after;
    return this.#made({ at, company: String(before.company_id), resource, id: before.id, kind, before, after });
  }

  #append(resource: ResourceName, records: SandboxRecord[], company: string, at: number): Change | undefined {
    const template = records.findLast((record) => String(record.company_id) === company);
    const last = records.at(-1);
    if (template === undefined || last === undefined) return undefined;
    const id = last.id + 1;
    if (Math.floor(id / ID_SPAN) !== Math.floor(last.id / ID_SPAN)) return undefined;
    const stamp = new Date(at).toISOString();
    const after: SandboxRecord = { ...template, id, created_at: stamp, updated_at: stamp };
    records.push(after);
    return this.#made({ at, company, resource, id, kind: 'append', before: null, after });
  }

  /**
   * The changes due of a rule with `poisson` timing: each target changes at the times of its own
   * Poisson process of mean interval `everyMs` (exponential intervals); once at most a tick, so that
   * a stalled timer does not make a burst.
   */
  #poissonTick(plan: Plan, dueAt: number[], at: number): number {
    let made = 0;
    plan.targets.forEach((target, i) => {
      if ((dueAt[i] ?? Number.POSITIVE_INFINITY) > at) return;
      dueAt[i] = at + exponential(plan.random ?? Math.random, plan.rule.everyMs);
      if (this.change(plan.rule.resource, plan.rule.kind, target, at) !== undefined) made += 1;
    });
    return made;
  }

  /** A change made: logged, then sent to the webhook (the record already reads as changed). */
  #made(change: Omit<Change, 'seq'>): Change {
    const logged = this.#log.add(change);
    this.#webhook?.changed(logged);
    return logged;
  }

  /**
   * Dates the records a rule changes as if it had always run: each last changed at a point of its
   * own within the rule's `everyMs` before `at` (its `updated_at`, and so its pages'
   * `Last-Modified`), not at the dataset's old dates, as a system of record's busy records are.
   * Not logged: nothing a reader could have missed happened since it began reading.
   */
  #backdate(plan: Plan, seed: number, at: number): void {
    if (plan.rule.kind === 'append') return;
    const records = this.#records.get(plan.rule.resource);
    if (records === undefined) return;
    const targets = new Set(plan.targets);
    records.forEach((record, index) => {
      if (!targets.has(record.id)) return;
      const changedAt = at - (rank(seed, record.id) % plan.rule.everyMs);
      if (Date.parse(String(record.updated_at)) < changedAt)
        records[index] = { ...record, updated_at: new Date(changedAt).toISOString() };
    });
  }

  #plan(rule: ChangeRule, seed: number, at: number): Plan {
    const companies = SANDBOX_COMPANIES.map(String).filter((c) => rule.company === undefined || c === rule.company);
    if (rule.kind === 'append') return { rule, targets: companies, owed: 0, next: 0, lastAt: at };
    const ids = (this.#records.get(rule.resource) ?? [])
      .filter((record) => companies.includes(String(record.company_id)))
      .map((record) => record.id)
      .sort((a, b) => rank(seed, a) - rank(seed, b));
    const named = rule.ids;
    const targets =
      named === undefined ? ids.slice(0, Math.ceil(ids.length * rule.share)) : ids.filter((id) => named.includes(id));
    if (rule.timing !== 'poisson') return { rule, targets, owed: 0, next: 0, lastAt: at };
    const random = prng(seed);
    const dueAt = targets.map(() => at + exponential(random, rule.everyMs));
    return { rule, targets, owed: 0, next: 0, lastAt: at, dueAt, random };
  }
}

/** An exponential interval of mean `meanMs` (the gaps of a Poisson process), drawn from `random`. */
function exponential(random: () => number, meanMs: number): number {
  return -Math.log(1 - random()) * meanMs;
}

/** A record with its first number of its own (`DOMAIN_FIELDS`) one more, and `updated_at` now. */
function updated(resource: ResourceName, record: SandboxRecord, at: number): SandboxRecord {
  const own = Object.keys(DOMAIN_FIELDS[resource](() => 0, record.id)).find((name) => typeof record[name] === 'number');
  return {
    ...record,
    updated_at: new Date(at).toISOString(),
    ...(own !== undefined && { [own]: Number(record[own]) + 1 }),
  };
}

/** A record whose status (a filter with a vocabulary, or `active`) takes the next value; else `updated`. */
function moved(resource: ResourceName, record: SandboxRecord, at: number): SandboxRecord {
  const filters = SEED_RESOURCES.find((r) => r.name === resource)?.filters ?? [];
  for (const filter of filters) {
    const vocabulary = TEXT_VALUES[`${resource}.${filter}`];
    const value = record[filter];
    let next: string | boolean | undefined;
    if (filter === 'active' && typeof value === 'boolean') next = !value;
    else if (vocabulary !== undefined && typeof value === 'string')
      next = vocabulary[(vocabulary.indexOf(value) + 1) % vocabulary.length];
    if (next !== undefined) return { ...record, [filter]: next, updated_at: new Date(at).toISOString() };
  }
  return updated(resource, record, at);
}
