/**
 * Label values, bounded whatever the input: a client-chosen path or an upstream's odd status must
 * not become a series of its own.
 */
import { isResourceName } from '../../catalog/resources.js';

/** A resource label: a catalog name, else `other` (a client-chosen path must not become a label). */
export function resourceLabel(resource: string | undefined): string {
  return resource !== undefined && isResourceName(resource) ? resource : 'other';
}

/** Statuses are the proxy's own, but a passed-through upstream status could be anything: bounded to 100–599. */
export function isStatusCode(status: number): boolean {
  return Number.isInteger(status) && status >= 100 && status <= 599;
}

/** A status label: the code, or `other` outside 100–599. */
export function statusLabel(status: number): string {
  return isStatusCode(status) ? String(status) : 'other';
}
