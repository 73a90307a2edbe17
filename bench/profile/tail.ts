/**
 * What ran while a reader waited (`npm run profile -- --kind tail`): the event loop's slow turns
 * recorded in the proxy (bench/profile/preload.ts), each set beside the collections that overlap
 * it and the CPU profile's samples inside it: by function (self time), and by the proxy's own
 * frame nearest the top of each sample's stack (which of its steps was running). A slow turn is
 * the window between two wake-ups of a 1-ms timer more than 5 ms apart.
 */
import { placeOf } from './summary.js';

/** A window between two wake-ups of the watch's timer, µs on the profile's clock. */
export interface Stall {
  readonly startUs: number;
  readonly endUs: number;
}

/** A collection (perf_hooks' `gc` entry): its kind (1 minor, 4 major, 8 incremental, 16 weak callbacks). */
export interface Collection {
  readonly startUs: number;
  readonly durationUs: number;
  readonly kind: number;
}

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

interface ProfileNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly children?: readonly number[] | undefined;
}

export interface TimedProfile {
  readonly nodes: readonly ProfileNode[];
  readonly startTime: number;
  readonly endTime: number;
  readonly samples?: readonly number[] | undefined;
  readonly timeDeltas?: readonly number[] | undefined;
}

/** What the preload writes for `--kind tail`. */
export interface TailRecord {
  readonly profile: TimedProfile;
  readonly stalls: readonly Stall[];
  readonly collections: readonly Collection[];
}

/** perf_hooks' `constants.NODE_PERFORMANCE_GC_*`. */
const GC_KINDS: Readonly<Record<number, string>> = { 1: 'minor', 4: 'major', 8: 'incremental', 16: 'weak' };

export interface Ranked {
  readonly what: string;
  readonly ms: number;
}

export interface StallReport {
  readonly startMs: number;
  readonly lengthMs: number;
  /** Collection time inside the window, ms, by kind. */
  readonly gcMs: Readonly<Record<string, number>>;
  readonly topFunctions: readonly Ranked[];
  readonly topOwnFrames: readonly Ranked[];
}

export interface TailReport {
  readonly seconds: number;
  readonly slowTurns: { readonly over5: number; readonly over10: number; readonly over20: number };
  readonly longest: readonly StallReport[];
  /** Over every slow turn of 10 ms or more. */
  readonly inSlowTurns: { readonly ms: number; readonly gcMs: Readonly<Record<string, number>> };
  readonly functions: readonly Ranked[];
  readonly ownFrames: readonly Ranked[];
}

function label(frame: CallFrame): string {
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
  return frame.url === '' ? name : `${name} (${placeOf(frame.url)}:${String(frame.lineNumber + 1)})`;
}

/** The samples of a profile in time order: when each was taken, and its node. */
function timedSamples(profile: TimedProfile): { at: number; node: number }[] {
  const samples = profile.samples ?? [];
  const deltas = profile.timeDeltas ?? [];
  const out: { at: number; node: number }[] = [];
  let at = profile.startTime;
  for (let i = 0; i < samples.length; i++) {
    at += deltas[i] ?? 0;
    out.push({ at, node: samples[i] ?? 0 });
  }
  return out;
}

/** For each node, its label and the label of the proxy's own frame nearest it on its stack (or none). */
function frameLabels(profile: TimedProfile): Map<number, { self: string; own: string }> {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parent = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parent.set(child, node.id);
  const labels = new Map<number, { self: string; own: string }>();
  for (const node of profile.nodes) {
    let own = '(outside the proxy’s code)';
    for (let id: number | undefined = node.id; id !== undefined; id = parent.get(id)) {
      const frame = byId.get(id)?.callFrame;
      if (frame !== undefined && placeOf(frame.url).startsWith('dist/')) {
        own = label(frame);
        break;
      }
    }
    labels.set(node.id, { self: label(node.callFrame), own });
  }
  return labels;
}

function rank(totals: Map<string, number>, top: number): Ranked[] {
  return [...totals]
    .map(([what, us]) => ({ what, ms: us / 1000 }))
    .sort((a, b) => b.ms - a.ms)
    .slice(0, top);
}

function gcWithin(collections: readonly Collection[], from: number, to: number): Record<string, number> {
  const byKind: Record<string, number> = {};
  for (const c of collections) {
    const overlap = Math.min(to, c.startUs + c.durationUs) - Math.max(from, c.startUs);
    if (overlap <= 0) continue;
    const kind = GC_KINDS[c.kind] ?? `kind ${String(c.kind)}`;
    byKind[kind] = (byKind[kind] ?? 0) + overlap / 1000;
  }
  return byKind;
}

/** Samples inside [from, to), summed per label (µs, each sample worth the gap to the next). */
function sampled(
  samples: readonly { at: number; node: number }[],
  labels: Map<number, { self: string; own: string }>,
  windows: readonly Stall[],
): { self: Map<string, number>; own: Map<string, number> } {
  const self = new Map<string, number>();
  const own = new Map<string, number>();
  let w = 0;
  const sorted = [...windows].sort((a, b) => a.startUs - b.startUs);
  for (let i = 0; i < samples.length; i++) {
    const sample = samples[i];
    if (sample === undefined) continue;
    while (w < sorted.length && (sorted[w]?.endUs ?? 0) <= sample.at) w++;
    const window = sorted[w];
    if (window === undefined) break;
    if (sample.at < window.startUs) continue;
    const weight = (samples[i + 1]?.at ?? sample.at) - sample.at;
    const names = labels.get(sample.node);
    if (names === undefined) continue;
    self.set(names.self, (self.get(names.self) ?? 0) + weight);
    own.set(names.own, (own.get(names.own) ?? 0) + weight);
  }
  return { self, own };
}

export function tailReport(record: TailRecord, top: number): TailReport {
  const { profile, stalls, collections } = record;
  const samples = timedSamples(profile);
  const labels = frameLabels(profile);
  const length = (s: Stall): number => (s.endUs - s.startUs) / 1000;
  const slow = stalls.filter((s) => length(s) >= 10);
  const longest = [...stalls]
    .sort((a, b) => length(b) - length(a))
    .slice(0, 10)
    .map((stall) => {
      const inside = sampled(samples, labels, [stall]);
      return {
        startMs: (stall.startUs - profile.startTime) / 1000,
        lengthMs: length(stall),
        gcMs: gcWithin(collections, stall.startUs, stall.endUs),
        topFunctions: rank(inside.self, 5),
        topOwnFrames: rank(inside.own, 5),
      };
    });
  const all = sampled(samples, labels, slow);
  const gcMs: Record<string, number> = {};
  for (const stall of slow)
    for (const [kind, ms] of Object.entries(gcWithin(collections, stall.startUs, stall.endUs)))
      gcMs[kind] = (gcMs[kind] ?? 0) + ms;
  return {
    seconds: (profile.endTime - profile.startTime) / 1e6,
    slowTurns: {
      over5: stalls.length,
      over10: slow.length,
      over20: stalls.filter((s) => length(s) >= 20).length,
    },
    longest,
    inSlowTurns: { ms: slow.reduce((sum, s) => sum + length(s), 0), gcMs },
    functions: rank(all.self, top),
    ownFrames: rank(all.own, top),
  };
}
