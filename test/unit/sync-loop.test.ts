/**
 * The checks of the shared operator state (src/control/sync-loop.ts): one at a time, and a check
 * asked for while one runs is one more round after it, whenever in the running one it was asked.
 */
import { describe, expect, it } from 'vitest';
import { SyncLoop } from '../../src/control/sync-loop.js';

/** Lets `ticks` rounds of microtasks run. */
async function microtasks(ticks: number): Promise<void> {
  for (let i = 0; i < ticks; i++) await Promise.resolve();
}

describe('the sync loop', () => {
  it('never runs two checks at once', async () => {
    let running = 0;
    let most = 0;
    const loop = new SyncLoop(
      async () => {
        running += 1;
        most = Math.max(most, running);
        await new Promise((resolve) => setTimeout(resolve, 5));
        running -= 1;
      },
      { intervalMs: 60_000, ready: () => true, onError: undefined },
    );
    await Promise.all([loop.run(), loop.run(), loop.run()]);
    loop.close();
    expect(most).toBe(1);
  });

  it('checks once more after the running check for a request made at any moment of it', async () => {
    for (let ticks = 0; ticks < 30; ticks++) {
      const events: string[] = [];
      const loop = new SyncLoop(
        async () => {
          events.push('check');
        },
        { intervalMs: 60_000, ready: () => true, onError: undefined },
      );
      const first = loop.run();
      await microtasks(ticks);
      events.push('asked');
      const second = loop.run();
      await Promise.all([first, second]);
      loop.close();
      expect(events.slice(events.indexOf('asked')), `asked after ${ticks} microtasks`).toContain('check');
    }
  });

  it('does not check before the connection is up', async () => {
    let checks = 0;
    const loop = new SyncLoop(
      async () => {
        checks += 1;
      },
      { intervalMs: 60_000, ready: () => false, onError: undefined },
    );
    await loop.run();
    loop.close();
    expect(checks).toBe(0);
  });
});
