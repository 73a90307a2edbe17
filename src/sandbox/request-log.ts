/**
 * The trace headers the last API requests carried (docs/sandbox.md, control on only): how tests see
 * what reaches the upstream (`GET /__sandbox/requests`, `Sandbox.received()`).
 */
import type { IncomingMessage } from 'node:http';

/**
 * What an API request carried that tests check (control on only): W3C Trace Context and the
 * request id. Never the credential, nor any other header.
 */
export interface ReceivedRequest {
  readonly target: string;
  readonly traceparent: string | undefined;
  readonly tracestate: string | undefined;
  readonly requestId: string | undefined;
}

/** Received requests kept, newest last. */
const MAX_RECEIVED = 200;

function one(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value.join(', ') : value;
}

/** The last `MAX_RECEIVED` requests' trace headers. */
export class RequestLog {
  #received: ReceivedRequest[] = [];

  record(req: IncomingMessage, target: string): void {
    this.#received.push({
      target,
      traceparent: one(req.headers.traceparent),
      tracestate: one(req.headers.tracestate),
      requestId: one(req.headers['x-request-id']),
    });
    if (this.#received.length > MAX_RECEIVED) this.#received = this.#received.slice(-MAX_RECEIVED);
  }

  /** A copy, oldest first. */
  list(): ReceivedRequest[] {
    return [...this.#received];
  }

  clear(): void {
    this.#received = [];
  }
}
