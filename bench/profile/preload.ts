/**
 * Loaded into a proxy under study (`node --import …/preload.js dist/main.js`, by bench/profile.ts):
 * on the first SIGUSR2 it starts V8's profiler of `PROFILE_KIND` in this process, on the second it
 * stops it and writes the profile to `PROFILE_OUT`, then prints `profile written` on stderr.
 *
 * - `cpu`: the sampling CPU profiler, one sample every 100 µs (a `.cpuprofile`).
 * - `heap`: the sampling heap profiler with the objects the collector freed kept in (what was
 *   allocated, not only what survived), one sample every 512 bytes on average.
 * - `survivors`: the same, without the objects a young-generation collection freed: what lived
 *   through one (promoted to the old generation, or still young when the profile stopped).
 * - `tail`: the CPU profiler as for `cpu`, and beside it the event loop's slow turns (a timer
 *   asked every millisecond, each late wake-up kept with its window) and every collection (kind,
 *   start, duration), all on the profile's clock: what ran while a reader waited
 *   (bench/profile/tail.ts reads it).
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';
import { PerformanceObserver } from 'node:perf_hooks';
import type { Collection, Stall, TailRecord } from './tail.js';

const out = process.env.PROFILE_OUT;
const kind =
  process.env.PROFILE_KIND === 'heap' || process.env.PROFILE_KIND === 'survivors' || process.env.PROFILE_KIND === 'tail'
    ? process.env.PROFILE_KIND
    : 'cpu';

/** A wake-up this late (ms) after the last is a slow turn. */
const SLOW_TURN_MS = 5;

/** Microseconds on the monotonic clock V8's profiler stamps its samples with. */
function nowUs(): number {
  return Number(process.hrtime.bigint() / 1000n);
}

/** The slow turns and the collections while the tail profile runs. */
class TailWatch {
  readonly stalls: Stall[] = [];
  readonly collections: Collection[] = [];
  #last = nowUs();
  #timer: NodeJS.Timeout | undefined;
  readonly #observer = new PerformanceObserver((list) => {
    // performance.now() counts from timeOrigin; the profile's clock from boot: one offset maps them.
    const offsetUs = nowUs() - performance.now() * 1000;
    for (const entry of list.getEntries()) {
      const detail: unknown = 'detail' in entry ? entry.detail : undefined;
      const gcKind = typeof detail === 'object' && detail !== null && 'kind' in detail ? detail.kind : 0;
      this.collections.push({
        startUs: offsetUs + entry.startTime * 1000,
        durationUs: entry.duration * 1000,
        kind: typeof gcKind === 'number' ? gcKind : 0,
      });
    }
  });

  start(): void {
    this.#observer.observe({ entryTypes: ['gc'] });
    this.#last = nowUs();
    this.#timer = setInterval(() => {
      const at = nowUs();
      if (at - this.#last > SLOW_TURN_MS * 1000) this.stalls.push({ startUs: this.#last, endUs: at });
      this.#last = at;
    }, 1);
  }

  stop(): void {
    clearInterval(this.#timer);
    this.#observer.disconnect();
  }
}

const watch = new TailWatch();

async function start(session: Session): Promise<void> {
  if (kind === 'cpu' || kind === 'tail') {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    await session.post('Profiler.start');
    if (kind === 'tail') watch.start();
    return;
  }
  await session.post('HeapProfiler.enable');
  await session.post('HeapProfiler.startSampling', {
    samplingInterval: 512,
    includeObjectsCollectedByMajorGC: true,
    includeObjectsCollectedByMinorGC: kind === 'heap',
  });
}

async function stopAndWrite(session: Session, file: string): Promise<void> {
  if (kind === 'tail') {
    watch.stop();
    const { profile } = await session.post('Profiler.stop');
    const record: TailRecord = { profile, stalls: watch.stalls, collections: watch.collections };
    writeFileSync(file, JSON.stringify(record));
  } else {
    const result =
      kind === 'cpu' ? await session.post('Profiler.stop') : await session.post('HeapProfiler.stopSampling');
    writeFileSync(file, JSON.stringify(result.profile));
  }
  process.stderr.write('profile written\n');
}

if (out !== undefined && out !== '') {
  const session = new Session();
  session.connect();
  let running = false;
  process.on('SIGUSR2', () => {
    const step = running ? stopAndWrite(session, out) : start(session);
    running = !running;
    step.catch((error: unknown) => process.stderr.write(`profiler: ${String(error)}\n`));
  });
}
