/**
 * One piece of deferrable work per event-loop turn. Work that can wait (a background refresh's
 * parsing, hashing and compressing of a page) asks the gate first; the gate lets one caller through
 * per turn, in the check phase (`setImmediate`), so that the I/O of every request that arrived
 * meanwhile (cache hits, each a few microseconds) is handled between two pieces, and a burst of
 * such work never holds the loop for long: a burst of refreshes run in one turn would be the
 * whole p99 of the hits queued behind it (docs/architecture.md#why-the-hit-path-is-built-as-it-is).
 */

/** Resolves when it is this caller's turn. */
export type TurnGate = () => Promise<void>;

export function createTurnGate(): TurnGate {
  const waiting: Array<() => void> = [];
  let scheduled = false;
  const next = (): void => {
    waiting.shift()?.();
    // An immediate queued by an immediate runs in the next turn of the loop, after its I/O.
    if (waiting.length > 0) setImmediate(next);
    else scheduled = false;
  };
  return function turn() {
    return new Promise<void>((resolve) => {
      waiting.push(resolve);
      if (!scheduled) {
        scheduled = true;
        setImmediate(next);
      }
    });
  };
}
