/**
 * The sandbox's fault switch (docs/sandbox.md), for tests only: latency, an error status, a malformed or
 * truncated body, and refusal. A fault may be limited to one resource and to its next N requests.
 */
import { isResourceName, type ResourceName } from './resources.js';

export type BodyFault = 'malformed' | 'truncated' | 'not-object';

export interface Faults {
  /** Delay before answering, ms. */
  readonly latencyMs?: number;
  /** Answer with this status and a small JSON body instead of the real answer. */
  readonly status?: number;
  /** `Retry-After` sent with `status` (seconds, an HTTP date, or anything else for tests). */
  readonly retryAfter?: string;
  /** Corrupt the real 200 answer. */
  readonly body?: BodyFault;
  /** Stop listening (connections refused) for this long, ms; then listen again on the same port. */
  readonly refuseForMs?: number;
  /** Only requests for this resource are affected. */
  readonly resource?: ResourceName;
  /** Only the next N affected requests; then the fault clears itself. */
  readonly times?: number;
}

export class FaultError extends Error {}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function optionalInteger(source: Record<string, unknown>, key: string, min: number, max: number): number | undefined {
  const value = source[key];
  if (value === undefined) return undefined;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new FaultError(`${key} must be an integer from ${min} to ${max}`);
  }
  return value;
}

/** Validates a fault description received over the control API. */
export function parseFaults(input: unknown): Faults {
  if (!isObject(input)) throw new FaultError('faults must be a JSON object');
  const known = new Set(['latencyMs', 'status', 'retryAfter', 'body', 'refuseForMs', 'resource', 'times']);
  for (const key of Object.keys(input)) if (!known.has(key)) throw new FaultError(`unknown fault ${key}`);
  const body = input.body;
  if (body !== undefined && body !== 'malformed' && body !== 'truncated' && body !== 'not-object') {
    throw new FaultError('body must be malformed, truncated or not-object');
  }
  const resource = input.resource;
  if (resource !== undefined && (typeof resource !== 'string' || !isResourceName(resource)))
    throw new FaultError('unknown resource');
  const retryAfter = input.retryAfter;
  if (retryAfter !== undefined && typeof retryAfter !== 'string') throw new FaultError('retryAfter must be a string');
  const latencyMs = optionalInteger(input, 'latencyMs', 0, 600_000);
  const status = optionalInteger(input, 'status', 200, 599);
  const refuseForMs = optionalInteger(input, 'refuseForMs', 1, 600_000);
  const times = optionalInteger(input, 'times', 1, 1_000_000);
  const faults: Faults = {
    ...(latencyMs !== undefined && { latencyMs }),
    ...(status !== undefined && { status }),
    ...(retryAfter !== undefined && { retryAfter }),
    ...(body !== undefined && { body }),
    ...(refuseForMs !== undefined && { refuseForMs }),
    ...(resource !== undefined && { resource }),
    ...(times !== undefined && { times }),
  };
  return faults;
}

/** The active faults, consumed request by request. */
export class FaultSwitch {
  #faults: Faults | undefined;
  #remaining = Number.POSITIVE_INFINITY;

  set(faults: Faults): void {
    this.#faults = faults;
    this.#remaining = faults.times ?? Number.POSITIVE_INFINITY;
  }

  clear(): void {
    this.#faults = undefined;
  }

  get active(): Faults | undefined {
    return this.#faults;
  }

  /** The faults that apply to this request, counting it against `times`. */
  take(resource: string | undefined): Faults | undefined {
    const faults = this.#faults;
    if (faults === undefined) return undefined;
    if (faults.resource !== undefined && faults.resource !== resource) return undefined;
    this.#remaining -= 1;
    if (this.#remaining <= 0) this.#faults = undefined;
    return faults;
  }
}
