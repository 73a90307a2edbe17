/**
 * The bench's judge of stale answers (bench/lib/freshness.ts): an answer that holds every record as
 * of its last change is current; one that misses a change is stale by the time since the oldest
 * change it misses — an update, a record moved into the page's filter, or one moved out that it
 * still shows — and changes after it was served, of other companies or past its page, do not count.
 * The feed reads the log as it grows, none missed, none kept twice.
 */
import { describe, expect, it } from 'vitest';
import { type Answered, ChangeFeed, type LoggedChange, staleness } from '../../bench/lib/freshness.js';

const T = 1_800_000_000_000;
const iso = (ms: number): string => new Date(ms).toISOString();

function change(seq: number, at: number, id: number, after: Record<string, unknown>, company = '1'): LoggedChange {
  return { seq, at, company, resource: 'transfers', id, after: { id, updated_at: iso(at), ...after } };
}

function listAnswer(records: Array<Record<string, unknown>>, servedAt: number, hasMore = false): Answered {
  return {
    company: '1',
    resource: 'transfers',
    read: { kind: 'list', filters: [['status', 'draft']], afterId: 0 },
    servedAt,
    body: { data: records, meta: { per_page: 30, has_more: hasMore, next_after_id: null } },
  };
}

describe('staleness', () => {
  const updated = change(1, T + 1_000, 10, { status: 'draft', quantity: 2 });
  const movedOut = change(2, T + 2_000, 11, { status: 'in_transit' });
  const movedIn = change(3, T + 3_000, 12, { status: 'draft' });

  it('is 0 for an answer that reflects every change made before it was served', () => {
    const current = listAnswer(
      [
        { id: 10, status: 'draft', updated_at: iso(T + 1_000) },
        { id: 12, status: 'draft', updated_at: iso(T + 3_000) },
      ],
      T + 5_000,
    );
    expect(staleness(current, [updated, movedOut, movedIn])).toBe(0);
  });

  it('is the time since the oldest change missed: an update, a record moved in, a record moved out still shown', () => {
    const old = listAnswer(
      [
        { id: 10, status: 'draft', updated_at: iso(T) },
        { id: 11, status: 'draft', updated_at: iso(T) },
      ],
      T + 5_000,
    );
    expect(staleness(old, [updated, movedOut, movedIn])).toBe(4_000);
    expect(staleness(old, [movedOut, movedIn])).toBe(3_000);
    expect(staleness(listAnswer([{ id: 10, status: 'draft', updated_at: iso(T + 1_000) }], T + 5_000), [movedIn])).toBe(
      2_000,
    );
  });

  it('judges a record it does not hold by its latest state: moved in then out is right, out then in is not', () => {
    const without12 = listAnswer([{ id: 10, status: 'draft', updated_at: iso(T + 1_000) }], T + 5_000);
    const inThenOut = [movedIn, change(4, T + 4_000, 12, { status: 'in_transit' })];
    expect(staleness(without12, inThenOut)).toBe(0);
    const outThenIn = [change(4, T + 1_500, 12, { status: 'in_transit' }), movedIn];
    expect(staleness(without12, outThenIn)).toBe(2_000);
    const inTwice = [change(4, T + 2_500, 12, { status: 'draft' }), movedIn];
    expect(staleness(without12, inTwice)).toBe(2_500);
  });

  it('ignores changes after it was served, of other companies, and past a full page', () => {
    const answer = listAnswer([{ id: 5, status: 'draft', updated_at: iso(T) }], T + 5_000, true);
    expect(staleness(answer, [change(4, T + 6_000, 5, { status: 'draft' })])).toBe(0);
    expect(staleness(answer, [change(5, T + 1_000, 5, { status: 'draft' }, '2')])).toBe(0);
    expect(staleness(answer, [change(6, T + 1_000, 9, { status: 'draft' })])).toBe(0);
  });

  it('judges a record page by its record alone', () => {
    const record: Answered = {
      company: '1',
      resource: 'transfers',
      read: { kind: 'record', id: 10 },
      servedAt: T + 5_000,
      body: { data: { id: 10, updated_at: iso(T) } },
    };
    expect(staleness(record, [updated, movedOut])).toBe(4_000);
    expect(staleness({ ...record, body: { data: { id: 10, updated_at: iso(T + 1_000) } } }, [updated, movedOut])).toBe(
      0,
    );
  });
});

describe('ChangeFeed', () => {
  it('reads each change once, from a millisecond before the last read, by collection', async () => {
    const log = [change(1, T, 10, {}), change(2, T, 11, {}, '2'), change(3, T + 1, 12, {})];
    let visible = 2;
    const asked: number[] = [];
    const feed = new ChangeFeed(async (since) => {
      asked.push(since);
      return log.slice(0, visible).filter((c) => c.at > since);
    });
    await feed.update();
    visible = 3;
    await feed.update();
    expect(asked).toEqual([0, T - 1]);
    expect(feed.of('1', 'transfers').map((c) => c.seq)).toEqual([1, 3]);
    expect(feed.of('2', 'transfers').map((c) => c.seq)).toEqual([2]);
  });
});
