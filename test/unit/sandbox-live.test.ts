/**
 * The sandbox's live mode (src/sandbox/live.ts, docs/sandbox.md#live-mode), on its own clock: rules
 * change the share of records they name at their rate, each change logged with its time and the
 * record before and after; a move takes a record out of one filtered list into another; an append
 * adds a record at the end; and the log dates a page by the latest change that touched what it
 * shows, and nothing else.
 */
import { describe, expect, it } from 'vitest';
import { generateDataset } from '../../src/sandbox/dataset.js';
import { LiveDataset } from '../../src/sandbox/live.js';
import { LIVE_PRESETS, LiveRuleError, mixedWorkload, parseLiveRules } from '../../src/sandbox/live-rules.js';
import { SEED_RESOURCES } from '../../src/sandbox/resources.js';

const NAMES = SEED_RESOURCES.map((resource) => resource.name);

function clocked(): { live: LiveDataset; advance(ms: number): void } {
  let now = 1_800_000_000_000;
  const live = new LiveDataset(generateDataset(), () => now);
  return {
    live,
    advance(ms) {
      now += ms;
    },
  };
}

describe('live mode', () => {
  it('changes each chosen record once every everyMs, the share asked for, and logs each change', () => {
    const { live, advance } = clocked();
    const records = live.dataset.get('remnants') ?? [];
    live.start([{ resource: 'remnants', kind: 'update', everyMs: 1_000, share: 0.1, company: undefined }], 7);
    live.stop(); // ticks by hand from here
    const chosen = Math.ceil(records.length * 0.1);
    advance(3_000);
    expect(live.tick()).toBe(chosen); // at most one round at once
    advance(1_000);
    expect(live.tick()).toBe(chosen);
    const changes = live.log.list({ since: 0, limit: 10_000 });
    expect(changes).toHaveLength(2 * chosen);
    expect(new Set(changes.map((change) => change.id)).size).toBe(chosen);
    const [first] = changes;
    expect(first?.kind).toBe('update');
    expect(first?.after.updated_at).toBe(new Date(first?.at ?? 0).toISOString());
    expect(first?.after.width_mm).toBe(Number(first?.before?.width_mm) + 1);
    expect(live.dataset.get('remnants')?.find((r) => r.id === changes.at(-1)?.id)).toBe(changes.at(-1)?.after);
  });

  it('moves a record between filtered lists, appends at the end, and dates pages by what touched them', () => {
    const { live, advance } = clocked();
    const transfers = live.dataset.get('transfers') ?? [];
    const record = transfers.find((r) => r.company_id === 1 && r.status === 'draft');
    if (record === undefined) throw new Error('no draft transfer of company 1');
    live.start([], 1);
    const startedAt = live.startedAt ?? 0;
    advance(5_000);
    const moved = live.change('transfers', 'move', record.id);
    expect(moved?.after.status).toBe('in_transit');
    const draft = { perPage: 100, afterId: 0, filters: [['status', 'draft']] as const };
    const received = { perPage: 100, afterId: 0, filters: [['status', 'received']] as const };
    // The draft list lost it, the in-transit list gained it; the received list is untouched.
    expect(live.log.listChangedAt('1', 'transfers', draft, undefined, false)).toBe(moved?.at);
    expect(
      live.log.listChangedAt('1', 'transfers', { ...draft, filters: [['status', 'in_transit']] }, undefined, false),
    ).toBe(moved?.at);
    expect(live.log.listChangedAt('1', 'transfers', received, undefined, false)).toBeUndefined();
    expect(live.log.listChangedAt('2', 'transfers', draft, undefined, false)).toBeUndefined();
    // A page that ends before the record is untouched by it.
    expect(live.log.listChangedAt('1', 'transfers', draft, record.id - 1, true)).toBeUndefined();
    expect(live.log.recordChangedAt('1', 'transfers', record.id)).toBe(moved?.at);
    advance(1_000);
    const last = transfers.at(-1);
    const appended = live.change('transfers', 'append', 'globex');
    expect(appended?.id).toBe((last?.id ?? 0) + 1);
    expect(transfers.at(-1)).toBe(appended?.after);
    expect(appended?.after.company_id).toBe('globex');
    expect(appended?.before).toBeNull();
    expect(startedAt).toBeLessThan(moved?.at ?? 0);
  });

  it('changes the records a rule names, and only those', () => {
    const { live, advance } = clocked();
    const [first, second] = (live.dataset.get('transfers') ?? []).map((record) => record.id);
    if (first === undefined || second === undefined) throw new Error('the dataset has transfers');
    live.start(
      [
        {
          resource: 'transfers',
          kind: 'update',
          everyMs: 1_000,
          share: 1,
          company: undefined,
          ids: [second, 999_999_999],
        },
      ],
      7,
    );
    live.stop();
    advance(2_000);
    expect(live.tick()).toBe(1);
    expect(live.log.list({ since: 0, limit: 10 }).map((change) => change.id)).toEqual([second]);
    expect(() =>
      parseLiveRules({ rules: [{ resource: 'movements', kind: 'append', everyMs: 1_000, ids: [1] }] }, NAMES),
    ).toThrow(/ids/);
    expect(() =>
      parseLiveRules({ rules: [{ resource: 'movements', kind: 'update', everyMs: 1_000, ids: [0] }] }, NAMES),
    ).toThrow(/ids/);
  });

  it('changes each record at its own Poisson times with timing poisson: exponential gaps of the mean asked', () => {
    const { live, advance } = clocked();
    const rule = parseLiveRules(
      { rules: [{ resource: 'remnants', kind: 'update', everyMs: 1_000, timing: 'poisson' }] },
      NAMES,
    );
    live.start(rule, 3);
    live.stop();
    for (let step = 0; step < 2_000; step++) {
      advance(50);
      live.tick();
    }
    const changes = live.log.list({ since: 0, limit: 1_000_000 });
    const records = live.dataset.get('remnants')?.length ?? 0;
    // 100 s of the test's own clock at a mean of 1 s: about 100 changes a record. No wall clock is
    // read (the dataset's clock is `advance`d, each tick by hand) and the draws are the seed's, so
    // the count is the same on every host; the bounds say what a Poisson process gives, not a time.
    // The gaps' spread is a Poisson process's (an exponential's standard deviation is its mean; a
    // periodic rule's would be 0).
    expect(changes.length / records).toBeGreaterThan(90);
    expect(changes.length / records).toBeLessThan(110);
    const byRecord = new Map<number, number[]>();
    for (const change of changes) byRecord.set(change.id, [...(byRecord.get(change.id) ?? []), change.at]);
    const gaps = [...byRecord.values()].flatMap((times) => times.slice(1).map((at, i) => at - (times[i] ?? at)));
    const mean = gaps.reduce((a, b) => a + b, 0) / gaps.length;
    const sd = Math.sqrt(gaps.reduce((a, b) => a + (b - mean) ** 2, 0) / gaps.length);
    expect(sd / mean).toBeGreaterThan(0.85);
    expect(() =>
      parseLiveRules({ rules: [{ resource: 'movements', kind: 'append', everyMs: 500, timing: 'poisson' }] }, NAMES),
    ).toThrow('timing');
  });

  it('runs the append preset as a log: a new movement per company every 300 ms, nothing else', () => {
    const { live, advance } = clocked();
    live.start(parseLiveRules({ preset: 'append' }, NAMES), 1);
    live.stop();
    advance(300);
    live.tick();
    const changes = live.log.list({ since: 0, limit: 100 });
    expect(changes.map((change) => [change.resource, change.kind])).toEqual(
      Array.from({ length: 4 }, () => ['movements', 'append']),
    );
    expect(new Set(changes.map((change) => change.company))).toEqual(new Set(['1', '2', '3', 'globex']));
  });

  it('runs the move preset: 5% of the movements leave their item_type list for the next one', () => {
    const { live, advance } = clocked();
    const movements = live.dataset.get('movements') ?? [];
    live.start(parseLiveRules({ preset: 'move' }, NAMES), 1);
    live.stop();
    advance(10_000);
    live.tick();
    const changes = live.log.list({ since: 0, limit: 10_000 });
    expect(changes).toHaveLength(Math.ceil(movements.length * 0.05));
    for (const change of changes) {
      expect(change.kind).toBe('move');
      expect(change.after.item_type).not.toBe(change.before?.item_type);
    }
  });

  it('reads rules and the mixed preset, and refuses what it cannot take, naming it', () => {
    for (const name of ['append', 'move'] as const)
      expect(parseLiveRules({ preset: name }, NAMES)).toEqual(LIVE_PRESETS[name]());
    expect(parseLiveRules({ preset: 'mixed' }, NAMES)).toEqual(mixedWorkload(NAMES));
    expect(
      parseLiveRules({ rules: [{ resource: 'movements', kind: 'append', everyMs: 500, company: 1 }] }, NAMES),
    ).toEqual([{ resource: 'movements', kind: 'append', everyMs: 500, share: 1, company: '1' }]);
    for (const [body, message] of [
      [{ rules: [{ resource: 'widgets', kind: 'update', everyMs: 500 }] }, 'rules[0].resource'],
      [{ rules: [{ resource: 'movements', kind: 'delete', everyMs: 500 }] }, 'rules[0].kind'],
      [{ rules: [{ resource: 'movements', kind: 'update', everyMs: 10 }] }, 'rules[0].everyMs'],
      [{ rules: [{ resource: 'movements', kind: 'update', everyMs: 500, share: 0 }] }, 'rules[0].share'],
      [{ rules: [{ resource: 'movements', kind: 'update', everyMs: 500, extra: 1 }] }, 'unknown member extra'],
      [{ preset: 'calm' }, 'live mode takes'],
      [{ preset: 'toString' }, 'live mode takes'],
    ] as const)
      expect(() => parseLiveRules(body, NAMES)).toThrow(message);
    expect(() => parseLiveRules({}, NAMES)).toThrow(LiveRuleError);
  });
});
