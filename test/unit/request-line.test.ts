/**
 * The request line written from a template (src/observability/logger.ts) is the line pino writes
 * for the same fields, byte for byte but the time, whatever the strings hold (fast-check, fixed
 * seed): quotes, backslashes, controls, any Unicode; absent fields left out. One deliberate
 * difference: a lone surrogate is escaped (`\ud800`, as JSON.stringify writes it), where pino
 * writes it raw and the UTF-8 on the wire turns it into U+FFFD; so the template's line always
 * parses back to the exact fields.
 */
import fc from 'fast-check';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import {
  createLogger,
  createRequestLog,
  type RequestLogFields,
  requestLineFields,
} from '../../src/observability/logger.js';

const RUNS = { seed: 20261123, numRuns: 500 };
/** JSON.stringify's escape of a lone surrogate. */
const LONE_SURROGATE = /\\ud[89a-f][0-9a-f]{2}/;

/** Lines written to a destination, as text. */
function collector(): { readonly lines: string[]; readonly destination: { write(line: string): void } } {
  const lines: string[] = [];
  return { lines, destination: { write: (line: string) => void lines.push(line) } };
}

/** Resolves after the current event-loop turn's `setImmediate` callbacks: request lines are written then. */
const endOfTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

/** The time pino and the template each wrote, set to one value so that the lines compare. */
function withoutTime(line: string): string {
  return line.replace(/^\{"level":30,"time":\d+,/, '{"level":30,"time":0,');
}

const text = fc.oneof(
  fc.string({ unit: 'binary', maxLength: 40 }),
  fc.string({ unit: 'grapheme', maxLength: 20 }),
  fc.constantFrom('"', '\\', '\u0000', '\n', '\u2028', '\ud800', '\udfff', 'x\ud83d\ude00y', '\u007f'),
);
const optionalText = fc.option(text, { nil: undefined });
const fields: fc.Arbitrary<RequestLogFields> = fc.record({
  requestId: text,
  method: text,
  path: text,
  resource: optionalText,
  status: fc.integer({ min: 100, max: 599 }),
  errorCode: optionalText,
  company: optionalText,
  subject: optionalText,
  cache: optionalText,
  upstreamMs: fc.option(fc.double({ min: 0, max: 1e6, noNaN: true }), { nil: undefined }),
  durationMs: fc.double({ min: 0, max: 1e6, noNaN: true }),
});

/** Fields drawn from a few values each, so that lines share paths, companies and codes in every mix. */
const few = fc.constantFrom('a', 'b', '"', '\\', 'x\ud83d\ude00y');
const optionalFew = fc.option(few, { nil: undefined });
const repeatingFields: fc.Arbitrary<RequestLogFields> = fc.record({
  requestId: few,
  method: few,
  path: few,
  resource: optionalFew,
  status: fc.constantFrom(200, 404),
  errorCode: optionalFew,
  company: optionalFew,
  subject: optionalFew,
  cache: optionalFew,
  upstreamMs: fc.option(fc.double({ min: 0, max: 1e6, noNaN: true }), { nil: undefined }),
  durationMs: fc.double({ min: 0, max: 1e6, noNaN: true }),
});

const A_LINE: RequestLogFields = {
  requestId: 'r',
  method: 'GET',
  path: '/api/slab/v1/operations/receipts',
  resource: 'receipts',
  status: 200,
  errorCode: undefined,
  company: '1',
  subject: 'dev',
  cache: 'hit',
  upstreamMs: undefined,
  durationMs: 0.5,
};

describe('the request line', () => {
  it('is the line pino writes for the same fields, for any field values', async () => {
    await fc.assert(
      fc.asyncProperty(fields, async (f) => {
        const template = collector();
        createRequestLog(createLogger('info', template.destination))(f);
        await endOfTurn();
        const reference = collector();
        pino({ level: 'info', base: null }, reference.destination).info(requestLineFields(f));
        expect(template.lines).toHaveLength(1);
        const line = template.lines[0] ?? '';
        if (!LONE_SURROGATE.test(JSON.stringify(f)))
          expect(withoutTime(line)).toBe(withoutTime(reference.lines[0] ?? ''));
        // Always JSON whose fields are exactly the request's, in the line's order.
        const expected = Object.fromEntries(
          Object.entries(requestLineFields(f)).filter(([, value]) => value !== undefined),
        );
        const { level, time, ...parsed } = JSON.parse(line) as Record<string, unknown>;
        expect(level).toBe(30);
        expect(typeof time).toBe('number');
        expect(Object.entries(parsed)).toEqual(Object.entries(expected));
      }),
      RUNS,
    );
  });

  it('is the line pino writes for the same fields after any other lines: no part of one is another’s', async () => {
    const template = collector();
    const log = createRequestLog(createLogger('info', template.destination));
    await fc.assert(
      fc.asyncProperty(repeatingFields, async (f) => {
        template.lines.length = 0;
        log(f);
        await endOfTurn();
        const { level, time, ...parsed } = JSON.parse(template.lines[0] ?? '') as Record<string, unknown>;
        expect([level, typeof time]).toEqual([30, 'number']);
        const expected = Object.entries(requestLineFields(f)).filter(([, value]) => value !== undefined);
        expect(Object.entries(parsed)).toEqual(expected);
      }),
      { ...RUNS, numRuns: 2_000 },
    );
  });

  it('reaches the destination with the other lines of its turn, in the order all were made', async () => {
    const out = collector();
    const logger = createLogger('info', out.destination);
    const log = createRequestLog(logger);
    const line = (requestId: string): RequestLogFields => ({ ...A_LINE, requestId });
    log(line('r-1'));
    log(line('r-2'));
    expect(out.lines).toEqual([]); // gathered until the turn ends…
    logger.warn('between'); // …or until another line must follow them
    log(line('r-3'));
    await endOfTurn();
    expect(out.lines).toHaveLength(3); // two request lines in one write, pino's line, the last one
    const ids = out.lines
      .join('')
      .split('\n')
      .filter((text) => text !== '')
      .map((text) => {
        const parsed = JSON.parse(text) as { req_id?: string; msg?: string };
        return parsed.req_id ?? parsed.msg;
      });
    expect(ids).toEqual(['r-1', 'r-2', 'between', 'r-3']);
  });

  it('is written by a flush (shutdown) without waiting for the turn to end', () => {
    const out = collector();
    const logger = createLogger('info', out.destination);
    createRequestLog(logger)({ ...A_LINE, requestId: 'r-last' });
    let flushed = false;
    logger.flush(() => {
      flushed = true;
    });
    expect(flushed).toBe(true);
    expect(out.lines.join('')).toContain('"req_id":"r-last"');
  });

  it('writes nothing below the info level', async () => {
    const quiet = collector();
    createRequestLog(createLogger('warn', quiet.destination))(A_LINE);
    await endOfTurn();
    expect(quiet.lines).toEqual([]);
  });

  it('falls back to pino for a logger it did not make, with the same fields', () => {
    const other = collector();
    const line: RequestLogFields = { ...A_LINE, requestId: 'r-1', durationMs: 0.123 };
    createRequestLog(pino({ level: 'info', base: null }, other.destination))(line);
    expect(JSON.parse(other.lines[0] ?? '')).toMatchObject({ req_id: 'r-1', cache: 'hit', ms: 0.12 });
  });
});
