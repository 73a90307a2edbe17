/** The request ids the proxy makes (src/http/request-id.ts): UUIDs of version 8, never repeated. */
import { describe, expect, it } from 'vitest';
import { newRequestId, REQUEST_ID } from '../../src/http/request-id.js';

/** RFC 9562: 8-4-4-4-12 hex digits, the version nibble 8, the variant's bits 10. */
const UUID_V8 = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('request ids', () => {
  it('are UUIDs of version 8, fit to be a client’s id too', () => {
    const id = newRequestId();
    expect(id).toMatch(UUID_V8);
    expect(id).toMatch(REQUEST_ID);
  });

  it('never repeat: 100 000 in a row are distinct, each one the next of a counter under one random part', () => {
    const made = Array.from({ length: 100_000 }, () => newRequestId());
    expect(new Set(made).size).toBe(made.length);
    const prefixes = new Set(made.map((id) => id.slice(0, 24)));
    expect(prefixes.size).toBe(1);
    const counters = made.map((id) => Number.parseInt(id.slice(24), 16));
    expect(counters.every((n, i) => i === 0 || n === (counters[i - 1] ?? 0) + 1)).toBe(true);
  });
});
