/**
 * What a running replica must close, registered by each part as it is built (as fastify's
 * `onClose` hooks are, beside what they close), and closed in the reverse order: the part built
 * last, which may use the ones before it, goes first, and the connections everything uses go last.
 */
export type Close = () => void | Promise<void>;

export class Closers {
  readonly #closes: Array<{ readonly name: string; readonly close: Close }> = [];

  /** `close` is run at the shutdown, before whatever was registered earlier. */
  add(name: string, close: Close): void {
    this.#closes.push({ name, close });
  }

  /** Closes everything registered, the last first; a part that fails to close leaves the others to close. */
  async closeAll(onError: (name: string, error: unknown) => void): Promise<void> {
    for (let entry = this.#closes.pop(); entry !== undefined; entry = this.#closes.pop()) {
      try {
        await entry.close();
      } catch (error) {
        onError(entry.name, error);
      }
    }
  }
}
