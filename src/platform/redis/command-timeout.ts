/**
 * The command timeout of the proxy's Redis clients: one a busy event loop cannot fake
 * (docs/architecture.md#ioredis-defaults-that-hurt-a-cache). Under a burst, a timer that fires late
 * would time out commands whose replies have long arrived; the breaker would then skip Redis and
 * each replica fetch every key itself.
 *
 * ioredis's own `commandTimeout` arms a timer per command that rejects it when it fires. When the
 * event loop is held up past the timeout (parsing a burst of requests, a collection), the timers
 * phase runs before the poll phase that would read the reply already waiting in the socket, and the
 * command fails although Redis answered in time. Here the timer only schedules the rejection with
 * `setImmediate`, which runs after the poll phase: a reply that is there is read first, and only a
 * Redis that really did not answer times out.
 *
 * It is armed through the client's `sendCommand`, which every command takes (pipelines and a
 * cluster's commands too, before they reach a node), and uses only the command's public members
 * (`promise`, `isResolved`, `reject`): nothing of ioredis's is replaced, and nothing at import.
 */
import type { Command } from 'ioredis';

/** The message of a command that timed out (ioredis's own, and ours). */
const COMMAND_TIMED_OUT = 'Command timed out';

/** Whether a command failed because Redis did not answer within the command timeout. */
export function isCommandTimeout(error: unknown): boolean {
  return error instanceof Error && error.message === COMMAND_TIMED_OUT;
}

/** What this module needs of a client: the door every command goes through. */
interface CommandSender {
  sendCommand(command: Command, ...rest: unknown[]): unknown;
}

/**
 * The command timeout of one client: of a cluster client, and of each of its nodes' connections
 * (the breaker asks a node `PING` on its own connection: health.ts). A command is armed once,
 * however many doors it passes (a cluster's command reaches its node's, and a redirection sends
 * it again).
 */
export class CommandTimeouts {
  readonly #timeoutMs: number;
  readonly #armed = new WeakSet<Command>();

  constructor(timeoutMs: number) {
    this.#timeoutMs = timeoutMs;
  }

  /** Every command `client` sends from now on fails with `Command timed out` past the timeout. */
  arm(client: CommandSender): void {
    const send = client.sendCommand.bind(client);
    const sendArmed = (command: Command, ...rest: unknown[]): unknown => {
      if (!this.#armed.has(command)) {
        this.#armed.add(command);
        armTimeout(command, this.#timeoutMs);
      }
      return send(command, ...rest);
    };
    Object.defineProperty(client, 'sendCommand', { value: sendArmed, writable: true, configurable: true });
  }
}

function armTimeout(command: Command, timeoutMs: number): void {
  if (command.isResolved) return;
  const timer = setTimeout(() => {
    setImmediate(() => {
      if (!command.isResolved) command.reject(new Error(COMMAND_TIMED_OUT));
    });
  }, timeoutMs);
  const clear = (): void => clearTimeout(timer);
  // Both handlers given: the promise's own rejection stays its callers' to handle.
  command.promise.then(clear, clear);
}
