/**
 * The garbage collector's own account of a process (`node --trace-gc-nvp`, one line per
 * collection on its stdout): for each collection its kind, its pause, the bytes allocated since the
 * one before and the bytes promoted to the old generation. What a request allocates is the sum of
 * `allocated` over a run's collections, divided by its answers; lines that are not collections
 * (a proxy's request log) are passed over.
 */
import type { Readable } from 'node:stream';

export type GcKind = 'scavenge' | 'minor mark-compact' | 'full';

export interface GcEvent {
  readonly kind: GcKind;
  readonly pauseMs: number;
  readonly allocatedBytes: number;
  readonly promotedBytes: number;
}

const LINE = /\bpause=([\d.]+) .*\bgc=(\w+) .*\ballocated=(\d+) promoted=(\d+)/;

/** One `--trace-gc-nvp` line, or `undefined` for any other line. */
export function parseGcLine(line: string): GcEvent | undefined {
  const match = LINE.exec(line);
  if (match === null) return undefined;
  const [, pause = '0', gc = '', allocated = '0', promoted = '0'] = match;
  const kind: GcKind = gc === 's' ? 'scavenge' : gc === 'mmc' ? 'minor mark-compact' : 'full';
  return { kind, pauseMs: Number(pause), allocatedBytes: Number(allocated), promotedBytes: Number(promoted) };
}

/** Collects the collections a process reports on `stdout` between `start()` and `stop()`. */
export class GcTrace {
  #partial = '';
  #recording = false;
  #events: GcEvent[] = [];

  constructor(stdout: Readable) {
    stdout.on('data', (chunk: Buffer) => {
      const text = this.#partial + chunk.toString('latin1');
      const lines = text.split('\n');
      this.#partial = lines.pop() ?? '';
      if (!this.#recording) return;
      for (const line of lines) {
        const event = parseGcLine(line);
        if (event !== undefined) this.#events.push(event);
      }
    });
  }

  start(): void {
    this.#events = [];
    this.#recording = true;
  }

  stop(): readonly GcEvent[] {
    this.#recording = false;
    return this.#events;
  }
}

function median(values: readonly number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted.length === 0 ? 0 : (sorted[Math.floor((sorted.length - 1) / 2)] ?? 0);
}

export interface GcSummary {
  readonly collections: number;
  readonly bytesPerAnswer: number;
  readonly promotedPerAnswer: number;
  readonly scavenges: number;
  /** The median young-generation pause: what a scavenge usually costs the requests it holds. */
  readonly medianScavengeMs: number;
  readonly longestScavengeMs: number;
  readonly fullCollections: number;
  readonly longestFullMs: number;
}

export function summarizeGc(events: readonly GcEvent[], answers: number): GcSummary {
  const young = events.filter((e) => e.kind !== 'full');
  const full = events.filter((e) => e.kind === 'full');
  const sum = (pick: (e: GcEvent) => number): number => events.reduce((total, e) => total + pick(e), 0);
  return {
    collections: events.length,
    bytesPerAnswer: sum((e) => e.allocatedBytes) / Math.max(1, answers),
    promotedPerAnswer: sum((e) => e.promotedBytes) / Math.max(1, answers),
    scavenges: young.length,
    medianScavengeMs: median(young.map((e) => e.pauseMs)),
    longestScavengeMs: young.reduce((max, e) => Math.max(max, e.pauseMs), 0),
    fullCollections: full.length,
    longestFullMs: full.reduce((max, e) => Math.max(max, e.pauseMs), 0),
  };
}
