/**
 * What a V8 profile says, per function and per place (bench/profile.ts): a CPU profile's self
 * time, or a sampling heap profile's bytes allocated, each divided by the answers of the run.
 */

interface CallFrame {
  readonly functionName: string;
  readonly url: string;
  readonly lineNumber: number;
}

interface CpuNode {
  readonly id: number;
  readonly callFrame: CallFrame;
  readonly hitCount?: number;
}

export interface CpuProfile {
  readonly nodes: readonly CpuNode[];
  readonly startTime: number;
  readonly endTime: number;
}

interface HeapNode {
  readonly callFrame: CallFrame;
  readonly selfSize: number;
  readonly children: readonly HeapNode[];
}

export interface HeapProfile {
  readonly head: HeapNode;
}

export interface Share {
  /** `function (place:line)`. */
  readonly what: string;
  /** Where it lives: node's own code, a package, or the proxy's. */
  readonly place: string;
  /** µs of CPU (cpu) or bytes (heap), per answer. */
  readonly perAnswer: number;
  readonly fraction: number;
}

/** The place of a script: `node:` internals, `<package>` for node_modules, else the file under the root. */
export function placeOf(url: string): string {
  if (url === '') return '(V8 and native)';
  if (url.startsWith('node:')) return 'node';
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url);
  if (modules !== null) return modules[1] ?? 'node_modules';
  const own = /\/(dist|dist-bench|src|bench)\/(.+)$/.exec(url);
  return own === null ? url : `${own[1] ?? ''}/${own[2] ?? ''}`;
}

function label(frame: CallFrame): string {
  const name = frame.functionName === '' ? '(anonymous)' : frame.functionName;
  const where = frame.url === '' ? '' : ` (${placeOf(frame.url)}:${String(frame.lineNumber + 1)})`;
  return `${name}${where}`;
}

function ranked(totals: Map<string, { place: string; value: number }>, answers: number): Share[] {
  const all = [...totals.values()].reduce((sum, t) => sum + t.value, 0);
  return [...totals]
    .map(([what, t]) => ({ what, place: t.place, perAnswer: t.value / answers, fraction: t.value / all }))
    .sort((a, b) => b.perAnswer - a.perAnswer);
}

function add(totals: Map<string, { place: string; value: number }>, key: string, place: string, value: number): void {
  const known = totals.get(key);
  if (known === undefined) totals.set(key, { place, value });
  else known.value += value;
}

/** Self CPU time per function, µs per answer (the profile's samples are `interval` µs apart). */
export function cpuShares(profile: CpuProfile, answers: number): { byFunction: Share[]; byPlace: Share[] } {
  const hits = profile.nodes.reduce((sum, n) => sum + (n.hitCount ?? 0), 0);
  const usPerHit = hits === 0 ? 0 : (profile.endTime - profile.startTime) / hits;
  const byFunction = new Map<string, { place: string; value: number }>();
  const byPlace = new Map<string, { place: string; value: number }>();
  for (const node of profile.nodes) {
    const us = (node.hitCount ?? 0) * usPerHit;
    if (us === 0) continue;
    const place = placeOf(node.callFrame.url);
    add(byFunction, label(node.callFrame), place, us);
    add(byPlace, place, place, us);
  }
  return { byFunction: ranked(byFunction, answers), byPlace: ranked(byPlace, answers) };
}

/** Bytes allocated per function, per answer (the sampled sizes, as V8 scales them). */
export function heapShares(profile: HeapProfile, answers: number): { byFunction: Share[]; byPlace: Share[] } {
  const byFunction = new Map<string, { place: string; value: number }>();
  const byPlace = new Map<string, { place: string; value: number }>();
  const stack: HeapNode[] = [profile.head];
  for (let node = stack.pop(); node !== undefined; node = stack.pop()) {
    stack.push(...node.children);
    if (node.selfSize === 0) continue;
    const place = placeOf(node.callFrame.url);
    add(byFunction, label(node.callFrame), place, node.selfSize);
    add(byPlace, place, place, node.selfSize);
  }
  return { byFunction: ranked(byFunction, answers), byPlace: ranked(byPlace, answers) };
}
