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
 */
import { writeFileSync } from 'node:fs';
import { Session } from 'node:inspector/promises';

const out = process.env.PROFILE_OUT;
const kind =
  process.env.PROFILE_KIND === 'heap' || process.env.PROFILE_KIND === 'survivors' ? process.env.PROFILE_KIND : 'cpu';

async function start(session: Session): Promise<void> {
  if (kind === 'cpu') {
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: 100 });
    await session.post('Profiler.start');
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
  const result = kind === 'cpu' ? await session.post('Profiler.stop') : await session.post('HeapProfiler.stopSampling');
  writeFileSync(file, JSON.stringify(result.profile));
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
