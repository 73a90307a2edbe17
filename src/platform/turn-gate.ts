/**
 * One piece of deferrable work per event-loop turn. Work that can wait (a background refresh's
 * parsing, hashing and compressing of a page) asks the gate first; the gate lets one caller through
 * per turn, in the check phase (`setImmediate`), so that the I/O of every request that arrived
 * meanwhile (cache hits, each a few microseconds) is handled between two pieces, and a burst of
 * such work never holds the loop for long (issue 11: fifty pages refreshed at once held it for
 * about ten milliseconds, the proxy's whole p99).
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
