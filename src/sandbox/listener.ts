/**
 * Where the sandbox listens, and its refusals (docs/sandbox.md: the `refuseForMs` fault): it stops
 * listening, so that connections are refused, for a while or until told to accept again, then
 * listens on the same address again.
 */
import type { Server } from 'node:http';
import { setTimeout as delay } from 'node:timers/promises';
import { closeServer, listenOn } from '../http/listen.js';

/** One refusal at a time: the one under way, and how to end it early. */
class Refusal {
  #underWay: Promise<void> | undefined;
  #end: (() => void) | undefined;

  /** Stops, waits `ms` or until `end()`, then resumes; a refusal asked for while one is under way joins it. */
  run(ms: number, stop: () => Promise<void>, resume: () => Promise<void>): Promise<void> {
    this.#underWay ??= (async () => {
      const ended = new Promise<void>((resolve) => {
        this.#end = resolve;
      });
      await stop();
      const timer = new AbortController();
      await Promise.race([delay(ms, undefined, { signal: timer.signal }).catch(() => undefined), ended]);
      timer.abort();
      this.#end = undefined;
      await resume();
      this.#underWay = undefined;
    })();
    return this.#underWay;
  }

  end(): void {
    this.#end?.();
  }

  /** Resolves once no refusal is under way (at once when none is). */
  async settled(): Promise<void> {
    await this.#underWay;
  }
}

/** The address the server listens on, kept so that a refusal can listen on it again. */
export class Listener {
  readonly #server: Server;
  #host = '127.0.0.1';
  #port = 0;
  readonly #refusal = new Refusal();

  constructor(server: Server) {
    this.#server = server;
  }

  /** Listens and resolves the base URL. */
  async listen(port: number, host: string): Promise<string> {
    this.#host = host;
    this.#port = await listenOn(this.#server, port, host);
    return this.url;
  }

  /** `http://<host>:<port>`: an IPv6 host in brackets, and the wildcard address as loopback. */
  get url(): string {
    const host = this.#host;
    const shown = host.includes(':') ? `[${host}]` : host === '0.0.0.0' ? '127.0.0.1' : host;
    return `http://${shown}:${this.#port}`;
  }

  refuse(ms: number): Promise<void> {
    return this.#refusal.run(
      ms,
      () => closeServer(this.#server, 0),
      async () => {
        await listenOn(this.#server, this.#port, this.#host);
      },
    );
  }

  accept(): void {
    this.#refusal.end();
  }

  async close(): Promise<void> {
    await this.#refusal.settled();
    await closeServer(this.#server, 0);
  }
}
