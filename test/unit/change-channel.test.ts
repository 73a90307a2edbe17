/**
 * The change channel (src/cache/read/change-channel.ts) and the L1's side of it
 * (src/cache/stores/l1.ts): while every number given out has been heard, the L1's copies serve as
 * long as their pages are fresh without a confirmation; a number skipped, a number given out and
 * not heard by the next heartbeat, a sequence that went back, or another process keeping it, each
 * makes the L1 confirm what it held before it serves it again; a heartbeat that fails leaves the
 * L1 asking Redis every lifetime, until one answers.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { ChangeChannel, type ChannelGap, type SequenceReading } from '../../src/cache/read/change-channel.js';
import { L1Cache } from '../../src/cache/stores/l1.js';
import { storedEntry } from '../helpers/entries.js';

/** A sequence as a test sets it: the last number given out, the keeper, or a failing Redis. */
class FakeSequence {
  last = 0;
  keeper = 'run-a';
  failing = false;

  read = (): Promise<SequenceReading> =>
    this.failing ? Promise.reject(new Error('down')) : Promise.resolve({ last: this.last, keeper: this.keeper });
}

/** What the channel told its listener, in order. */
class Recorder {
  readonly said: string[] = [];
  tell(told: boolean): void {
    this.said.push(told ? 'told' : 'asking');
  }
  distrust(): void {
    this.said.push('distrust');
  }
}

const channels: ChangeChannel[] = [];
afterEach(() => {
  for (const channel of channels.splice(0)) channel.close();
});

async function started(
  sequence: FakeSequence,
): Promise<{ channel: ChangeChannel; heard: Recorder; gaps: ChannelGap[] }> {
  const heard = new Recorder();
  const gaps: ChannelGap[] = [];
  // An hour between heartbeats: the test runs each one itself.
  const channel = new ChangeChannel({
    read: sequence.read,
    listener: heard,
    intervalMs: 3_600_000,
    retryMs: 3_600_000,
    onGap: (g) => gaps.push(g),
  });
  channels.push(channel);
  await channel.beat();
  return { channel, heard, gaps };
}

describe('the change channel', () => {
  it('vouches from its first heartbeat on (for what is read after it), and stays told while every number given out is heard in order', async () => {
    const sequence = new FakeSequence();
    sequence.last = 41;
    const { channel, heard, gaps } = await started(sequence);
    expect(heard.said).toEqual(['distrust', 'told']);
    for (const n of [42, 43, 44]) {
      sequence.last = n;
      channel.heard(n);
      await channel.beat();
    }
    expect(channel.told).toBe(true);
    expect(heard.said).toEqual(['distrust', 'told']);
    expect(gaps).toEqual([]);
  });

  it('a number skipped is a gap at once', async () => {
    const sequence = new FakeSequence();
    const { channel, heard, gaps } = await started(sequence);
    channel.heard(1);
    channel.heard(3);
    expect(gaps).toEqual(['skipped']);
    expect(heard.said).toEqual(['distrust', 'told', 'distrust']);
    // Heard again, or late: nothing new.
    channel.heard(2);
    channel.heard(3);
    expect(gaps).toEqual(['skipped']);
  });

  it('a number given out and not heard is a gap at the next heartbeat, not before: its announcement may be on its way', async () => {
    const sequence = new FakeSequence();
    const { channel, gaps } = await started(sequence);
    sequence.last = 1;
    await channel.beat();
    expect(gaps).toEqual([]);
    await channel.beat();
    expect(gaps).toEqual(['missed']);
    expect(channel.told).toBe(true);
    // Heard before the next heartbeat instead: no gap.
    sequence.last = 2;
    await channel.beat();
    channel.heard(2);
    await channel.beat();
    expect(gaps).toEqual(['missed']);
  });

  it('a sequence that went back (a flush, an eviction) and another process keeping it (a failover) are gaps', async () => {
    const sequence = new FakeSequence();
    sequence.last = 10;
    const { channel, gaps } = await started(sequence);
    sequence.last = 3;
    await channel.beat();
    expect(gaps).toEqual(['regressed']);
    // The promoted replica lacks the last number and its announcement: the next one looks contiguous.
    sequence.keeper = 'run-b';
    await channel.beat();
    expect(gaps).toEqual(['regressed', 'failover']);
    sequence.last = 4;
    channel.heard(4);
    await channel.beat();
    expect(gaps).toEqual(['regressed', 'failover']);
    expect(channel.told).toBe(true);
  });

  it('a heartbeat that fails leaves the L1 asking, until one answers with nothing missed', async () => {
    const sequence = new FakeSequence();
    const { channel, heard, gaps } = await started(sequence);
    sequence.failing = true;
    await channel.beat();
    expect(channel.told).toBe(false);
    sequence.failing = false;
    await channel.beat();
    expect(heard.said).toEqual(['distrust', 'told', 'asking', 'told']);
    expect(gaps).toEqual([]);
  });

  it('without a verdict, sends the next heartbeat after its retry, not a whole interval on', async () => {
    const sequence = new FakeSequence();
    sequence.failing = true;
    let reads = 0;
    let answered: () => void = () => undefined;
    const told = new Promise<void>((resolve) => {
      answered = resolve;
    });
    const channel = new ChangeChannel({
      read: () => {
        reads += 1;
        // Redis answers from the third heartbeat on.
        if (reads === 3) sequence.failing = false;
        return sequence.read();
      },
      listener: new Recorder(),
      intervalMs: 3_600_000,
      retryMs: 5,
      onTold: (yes) => {
        if (yes) answered();
      },
    });
    channels.push(channel);
    await told;
    expect(reads).toBe(3);
    expect(channel.told).toBe(true);
  });

  it('numbers heard before the first heartbeat answered count toward it', async () => {
    const heard = new Recorder();
    const sequence = new FakeSequence();
    const channel = new ChangeChannel({
      read: sequence.read,
      listener: heard,
      intervalMs: 3_600_000,
      retryMs: 3_600_000,
    });
    channels.push(channel);
    channel.heard(7);
    sequence.last = 6;
    await channel.beat();
    channel.heard(8);
    sequence.last = 8;
    await channel.beat();
    expect(heard.said).toEqual(['distrust', 'told']);
  });
});

describe('the L1 told by the channel', () => {
  const KEY = 'slab:{1:receipts}:co:list:per_page=1';
  const TAG = '{1:receipts}';
  let clock = 0;
  const l1 = (): L1Cache => {
    clock = 0;
    const cache = new L1Cache({ maxBytes: 1 << 20, ttlMs: 1_000, clock: { now: () => clock } });
    cache.noteGeneration(TAG, 'g1');
    return cache;
  };

  it('serves a copy past its L1 lifetime, with no confirmation due, while told', () => {
    const cache = l1();
    cache.tell(true);
    const entry = storedEntry(0, { generation: 'g1' });
    cache.set(KEY, entry);
    clock = 60_000;
    expect(cache.get(KEY, TAG)).toBe(entry);
    expect(cache.dueForReread(KEY)).toBeUndefined();
  });

  it('without a verdict, serves a copy for its L1 lifetime and asks for its confirmation before', () => {
    const cache = l1();
    const entry = storedEntry(0, { generation: 'g1' });
    cache.set(KEY, entry);
    clock = 900;
    expect(cache.get(KEY, TAG)).toBe(entry);
    expect(cache.dueForReread(KEY)).toBe(entry);
    clock = 1_000;
    expect(cache.get(KEY, TAG)).toBeUndefined();
  });

  it('after a gap, serves no copy set before it until it is set again', () => {
    const cache = l1();
    cache.tell(true);
    const entry = storedEntry(0, { generation: 'g1' });
    const since = cache.sequence();
    cache.set(KEY, entry);
    cache.distrust();
    expect(cache.get(KEY, TAG)).toBeUndefined();
    expect(cache.lapsed(KEY, TAG)).toBeUndefined();
    // A read that began before the gap gives no vouched copy either.
    cache.set(KEY, entry, since);
    expect(cache.get(KEY, TAG)).toBeUndefined();
    cache.set(KEY, entry, cache.sequence());
    expect(cache.get(KEY, TAG)).toBe(entry);
  });

  it('when the verdict is lost, serves a copy it vouched for half a lifetime more, and asks for its confirmation before', () => {
    const cache = l1();
    cache.tell(true);
    const entry = storedEntry(0, { generation: 'g1' });
    cache.set(KEY, entry);
    clock = 60_000;
    cache.tell(false);
    // Not all lapsed at once: as if confirmed two heartbeats before the verdict was lost.
    expect(cache.get(KEY, TAG)).toBe(entry);
    clock = 60_400;
    expect(cache.dueForReread(KEY)).toBe(entry);
    clock = 60_500;
    expect(cache.get(KEY, TAG)).toBeUndefined();
    // A copy set before the channel's last gap has no such grace.
    cache.tell(true);
    cache.distrust();
    cache.tell(false);
    expect(cache.get(KEY, TAG)).toBeUndefined();
  });

  it('has a copy confirmed at its next hit once another fill of its page is announced', () => {
    const cache = l1();
    cache.tell(true);
    const entry = storedEntry(0, { generation: 'g1' });
    cache.set(KEY, entry);
    expect(cache.dueForReread(KEY)).toBeUndefined();
    cache.supersede(KEY);
    expect(cache.get(KEY, TAG)).toBe(entry);
    expect(cache.dueForReread(KEY)).toBe(entry);
    cache.set(KEY, entry);
    expect(cache.dueForReread(KEY)).toBeUndefined();
  });
});
