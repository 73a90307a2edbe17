/**
 * The operator state as data: last writer wins per entry, deletions are entries too, and only
 * expiry removes anything. Copies merged in any order, any number of times, end up the same: what
 * lets every replica write its copy back to a Redis that lost the state without undoing anything.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  decodeEntry,
  encodeEntry,
  fieldOf,
  OperatorState,
  parseField,
  type StateEntry,
  wins,
} from '../../src/control/operator-state.js';

const NOW = 1_800_000_000_000;

/** A live value of the field's kind, from a stamp. */
function valueFor(field: string, t: number): StateEntry['v'] {
  if (field.startsWith('ttl:')) return { ttl: t };
  if (field.startsWith('wt:')) return { weight: 1 + (t % 100) };
  return true;
}

describe('operator state', () => {
  it('applies the later stamp and keeps a deletion over an earlier block', () => {
    const state = new OperatorState();
    state.apply(fieldOf('co', '7'), { t: 10, v: true, x: null });
    expect(state.isCompanyBlocked('7')).toBe(true);
    state.apply(fieldOf('co', '7'), { t: 20, v: null, x: NOW + 1_000 });
    expect(state.isCompanyBlocked('7')).toBe(false);
    // A copy that missed the deletion writes its block back: it loses.
    expect(state.apply(fieldOf('co', '7'), { t: 10, v: true, x: null })).toBe(false);
    expect(state.isCompanyBlocked('7')).toBe(false);
  });

  it('answers revocations by jti until exp, by sub until deleted, by digest until exp', () => {
    const state = new OperatorState();
    state.apply(fieldOf('jti', 'j1'), { t: 1, v: true, x: NOW + 60_000 });
    state.apply(fieldOf('sub', 's1'), { t: 1, v: true, x: null });
    state.apply(fieldOf('tok', 'abc'), { t: 1, v: true, x: NOW + 60_000 });
    expect(state.isRevoked({ tokenId: 'j1' }, NOW)).toBe(true);
    expect(state.isRevoked({ tokenId: 'j1' }, NOW + 60_000)).toBe(false); // the token expired anyway
    expect(state.isRevoked({ subject: 's1' }, NOW + 10 ** 9)).toBe(true);
    expect(state.isRevoked({ subject: 's2', tokenId: 'j2' }, NOW)).toBe(false);
    expect(state.hasDigests).toBe(true);
    expect(state.isDigestRevoked('abc', NOW)).toBe(true);
    expect(state.isEmployeeBlocked('1', '2')).toBe(false);
  });

  it('removes entries only when they expire', () => {
    const state = new OperatorState();
    state.apply(fieldOf('jti', 'j1'), { t: 1, v: true, x: NOW });
    state.apply(fieldOf('co', '1'), { t: 1, v: null, x: NOW + 5 });
    state.apply(fieldOf('em', '1/2'), { t: 1, v: true, x: null });
    state.prune(NOW);
    expect([...state.entries()].map(([field]) => field).sort()).toEqual(['co:1', 'em:1/2']);
    state.prune(NOW + 5);
    expect([...state.entries()].map(([field]) => field)).toEqual(['em:1/2']);
    expect(state.isEmployeeBlocked('1', '2')).toBe(true);
  });

  it('keeps TTL overrides as the overrides in force', () => {
    const state = new OperatorState();
    state.apply(fieldOf('ttl', 'receipts'), { t: 1, v: { ttl: 5 }, x: null });
    expect(state.overrides()).toEqual({ receipts: { ttl: 5 } });
    state.apply(fieldOf('ttl', 'receipts'), { t: 2, v: null, x: NOW });
    expect(state.overrides()).toEqual({});
  });

  it("keeps companies' weights as the weights in force", () => {
    const state = new OperatorState();
    state.apply(fieldOf('wt', 'acme'), { t: 1, v: { weight: 3 }, x: null });
    state.apply(fieldOf('wt', '7'), { t: 1, v: { weight: 10 }, x: null });
    expect(state.weights()).toEqual({ acme: 3, '7': 10 });
    expect(state.overrides()).toEqual({});
    state.apply(fieldOf('wt', 'acme'), { t: 2, v: null, x: NOW });
    expect(state.weights()).toEqual({ '7': 10 });
    const entry: StateEntry = { t: 5, v: { weight: 4 }, x: null };
    expect(decodeEntry('wt:acme', encodeEntry(entry))).toEqual(entry);
  });

  it.each([
    ['a weight of 0', 'wt:1', '{"t":1,"x":null,"v":{"weight":0}}'],
    ['a weight over 100', 'wt:1', '{"t":1,"x":null,"v":{"weight":101}}'],
    ['a fractional weight', 'wt:1', '{"t":1,"x":null,"v":{"weight":1.5}}'],
    ['true on a weight field', 'wt:1', '{"t":1,"x":null,"v":true}'],
    ['an override on a weight field', 'wt:1', '{"t":1,"x":null,"v":{"ttl":5}}'],
    ['a weight on a TTL field', 'ttl:receipts', '{"t":1,"x":null,"v":{"weight":2}}'],
    ['a weight on a block', 'co:1', '{"t":1,"x":null,"v":{"weight":2}}'],
    ['an unknown kind', 'zz:1', '{"t":1,"x":null,"v":true}'],
    ['no id', 'co:', '{"t":1,"x":null,"v":true}'],
    ['not JSON', 'co:1', '{'],
    ['a negative stamp', 'co:1', '{"t":-1,"x":null,"v":true}'],
    ['an override on a block', 'co:1', '{"t":1,"x":null,"v":{"ttl":5}}'],
    ['true on a TTL field', 'ttl:receipts', '{"t":1,"x":null,"v":true}'],
    ['an unknown resource', 'ttl:widgets', '{"t":1,"x":null,"v":{"ttl":5}}'],
    ['a bad override', 'ttl:receipts', '{"t":1,"x":null,"v":{"ttl":-5}}'],
    ['an extra member', 'co:1', '{"t":1,"x":null,"v":true,"evil":1}'],
  ])('reads %s from Redis as no entry, never an exception', (_label, field, text) => {
    expect(decodeEntry(field, text)).toBeUndefined();
  });

  it('round-trips every well-formed entry through its text', () => {
    const entry: StateEntry = { t: 5, v: { ttl: 1, notFoundTtl: 2 }, x: null };
    expect(decodeEntry('ttl:receipts', encodeEntry(entry))).toEqual(entry);
    expect(parseField('em:1/2')).toEqual({ kind: 'em', id: '1/2' });
  });

  it('merges copies to the same state whatever the order (a property)', () => {
    const field = fc.constantFrom('co:1', 'co:2', 'sub:a', 'jti:x', 'ttl:receipts', 'wt:1');
    const entry = fc.record({
      t: fc.integer({ min: 0, max: 50 }),
      v: fc.constantFrom<StateEntry['v']>(true, null),
      x: fc.constantFrom<number | null>(null, NOW + 1_000),
    });
    const change = fc
      .tuple(field, entry)
      .map(([f, e]): [string, StateEntry] => [f, e.v === true ? { ...e, v: valueFor(f, e.t) } : e]);
    fc.assert(
      fc.property(fc.array(change, { maxLength: 30 }), fc.integer(), (changes, seed) => {
        const inOrder = new OperatorState();
        for (const [f, e] of changes) inOrder.apply(f, e);
        const shuffled = [...changes].sort((a, b) => ((a[1].t * 31 + seed) % 7) - ((b[1].t * 31 + seed) % 7));
        const other = new OperatorState();
        for (const [f, e] of [...shuffled, ...shuffled]) other.apply(f, e); // twice: merging is idempotent
        const snapshot = (s: OperatorState): string[] =>
          [...s.entries()].map(([f, e]) => `${f}=${encodeEntry(e)}`).sort();
        expect(snapshot(other)).toEqual(snapshot(inOrder));
        expect(other.revocations()).toEqual(inOrder.revocations());
        expect(other.blocks()).toEqual(inOrder.blocks());
        expect(other.overrides()).toEqual(inOrder.overrides());
        expect(other.weights()).toEqual(inOrder.weights());
      }),
    );
  });

  it('orders equal stamps by their text, so every copy picks the same one', () => {
    const a: StateEntry = { t: 3, v: true, x: null };
    const b: StateEntry = { t: 3, v: null, x: NOW };
    expect(wins(a, b)).toBe(!wins(b, a));
  });
});
