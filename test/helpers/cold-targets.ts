/**
 * Targets no one asked for yet: every request a miss that needs the upstream, for the suites that
 * load the upstream budget. Each call of the returned function gives the next one, in turn over the
 * thirteen resources; `from` keeps the cursors of one suite apart from another's.
 */
import { API_PREFIX, RESOURCE_NAMES } from '../../src/catalog/resources.js';

export function coldTargets(from: number): () => string {
  let next = 0;
  return () => {
    const i = next++;
    const resource = RESOURCE_NAMES[i % RESOURCE_NAMES.length] ?? 'receipts';
    return `${API_PREFIX}/${resource}?after_id=${String(from + i)}`;
  };
}
