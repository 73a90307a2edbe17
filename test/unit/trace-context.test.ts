/**
 * W3C Trace Context as a client sends it (https://www.w3.org/TR/trace-context/): what is taken as
 * the request's parent, and what is ignored (a new trace starts, never an error).
 */
import { describe, expect, it } from 'vitest';
import {
  clientTraceFields,
  formatTraceparent,
  parseTraceparent,
  parseTracestate,
} from '../../src/observability/trace-context.js';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT = '00f067aa0ba902b7';
const VALID = `00-${TRACE}-${PARENT}-01`;
/** A JWS of the shape the proxy refuses to carry anywhere (src/observability/secrets.ts). */
const TOKEN_LIKE = 'eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln';

describe('traceparent (§3.2)', () => {
  it('reads version 00: trace-id, parent-id and the flags byte', () => {
    expect(parseTraceparent(VALID)).toEqual({ traceId: TRACE, parentId: PARENT, flags: 1 });
    expect(parseTraceparent(`00-${TRACE}-${PARENT}-00`)).toEqual({ traceId: TRACE, parentId: PARENT, flags: 0 });
  });

  it('reads a higher version by its first four fields, when a dash or the end follows them (§3.2.4)', () => {
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01`)).toEqual({ traceId: TRACE, parentId: PARENT, flags: 1 });
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01-what-the-future-holds`)).toEqual({
      traceId: TRACE,
      parentId: PARENT,
      flags: 1,
    });
    expect(parseTraceparent(`cc-${TRACE}-${PARENT}-01x`)).toBeUndefined();
  });

  it.each([
    ['absent', undefined],
    ['empty', ''],
    ['version ff (§3.2.2.2)', `ff-${TRACE}-${PARENT}-01`],
    ['version 00 with more after the flags', `${VALID}-00`],
    ['upper-case hex (HEXDIGLC)', `00-${TRACE.toUpperCase()}-${PARENT}-01`],
    ['an all-zero trace-id (§3.2.2.3)', `00-${'0'.repeat(32)}-${PARENT}-01`],
    ['an all-zero parent-id (§3.2.2.4)', `00-${TRACE}-${'0'.repeat(16)}-01`],
    ['a short trace-id', `00-${TRACE.slice(1)}-${PARENT}-01`],
    ['a long parent-id', `00-${TRACE}-${PARENT}0-01`],
    ['one-digit flags', `00-${TRACE}-${PARENT}-1`],
    ['non-hex flags', `00-${TRACE}-${PARENT}-0g`],
    ['underscores for dashes', `00_${TRACE}_${PARENT}_01`],
    ['two headers, as Node joins them (§3.2.1: more than one is invalid)', `${VALID}, ${VALID}`],
    ['two headers, as an array', [VALID, VALID]],
    ['a token', TOKEN_LIKE],
  ])('ignores %s', (_name, value) => {
    expect(parseTraceparent(value)).toBeUndefined();
  });

  it('writes version 00 with the sampled bit only', () => {
    expect(formatTraceparent(TRACE, PARENT, true)).toBe(VALID);
    expect(formatTraceparent(TRACE, PARENT, false)).toBe(`00-${TRACE}-${PARENT}-00`);
    expect(parseTraceparent(formatTraceparent(TRACE, PARENT, true))).toEqual({
      traceId: TRACE,
      parentId: PARENT,
      flags: 1,
    });
  });
});

describe('tracestate (§3.3)', () => {
  it('keeps valid members in their order, without the optional whitespace and empty members', () => {
    expect(parseTracestate('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE')).toBe('rojo=00f067aa0ba902b7,congo=t61rcWkgMzE');
    expect(parseTracestate(' rojo=1 ,, tenant@vendor=x y ,')).toBe('rojo=1,tenant@vendor=x y');
  });

  it.each([
    ['absent', undefined],
    ['only empty members', ' , ,'],
    ['a member without "="', 'rojo=1,congo'],
    ['an upper-case key', 'Rojo=1'],
    ['a key starting with a digit (only a tenant-id may)', '1rojo=1'],
    ['a value with "="', 'rojo=a=b'],
    ['a key with a space', 'ro jo=1'],
    ['a control character', 'rojo=a\u0001b'],
    ['a duplicate key', 'rojo=1,rojo=2'],
    ['more than 32 members', Array.from({ length: 33 }, (_, i) => `k${i}=v`).join(',')],
    ['a value holding a token (the proxy forwards no credential)', `rojo=1,leak=${TOKEN_LIKE}`],
    ['an array (not how Node gives a header)', ['rojo=1']],
  ])('drops the whole value for %s', (_name, value) => {
    expect(parseTracestate(value)).toBeUndefined();
  });

  it('over 512 characters, drops members longer than 128 first, then members from the end (§3.3.1.5)', () => {
    const long = `big=${'x'.repeat(200)}`;
    const small = Array.from({ length: 20 }, (_, i) => `k${String(i).padStart(2, '0')}=${'v'.repeat(20)}`);
    const kept = parseTracestate([small[0], long, ...small.slice(1)].join(','));
    expect(kept).toBe(small.join(','));
    const many = Array.from({ length: 32 }, (_, i) => `k${String(i).padStart(2, '0')}=${'v'.repeat(20)}`);
    const cut = parseTracestate(many.join(',')) ?? '';
    expect(cut.length).toBeLessThanOrEqual(512);
    expect(cut).toBe(many.slice(0, cut.split(',').length).join(','));
    expect(cut.split(',').length).toBe(20);
  });
});

describe("the client's fields passed on while no span is exported", () => {
  it('passes a traceparent that parses exactly as sent, with its tracestate as parsed', () => {
    const later = `01-${TRACE}-${PARENT}-01-more`;
    expect(clientTraceFields(VALID, 'rojo=1, congo=2')).toEqual({ traceparent: VALID, tracestate: 'rojo=1,congo=2' });
    expect(clientTraceFields(later, undefined)).toEqual({ traceparent: later, tracestate: undefined });
  });

  it('passes nothing for a missing, repeated or malformed traceparent, whatever the tracestate', () => {
    expect(clientTraceFields(undefined, 'rojo=1')).toBeUndefined();
    expect(clientTraceFields([VALID, VALID], 'rojo=1')).toBeUndefined();
    expect(clientTraceFields(`${VALID}, ${VALID}`, 'rojo=1')).toBeUndefined();
    expect(clientTraceFields(VALID.replace('-01', '-1'), 'rojo=1')).toBeUndefined();
  });

  it('never passes a tracestate that holds a token', () => {
    expect(clientTraceFields(VALID, `rojo=${TOKEN_LIKE}`)).toEqual({ traceparent: VALID, tracestate: undefined });
  });
});
