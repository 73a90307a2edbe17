/**
 * An open-loop, paced load (what wrk2 does; wrk2 is not in Debian): request k is due at
 * `k / overallRate` seconds from the start, whatever the answers, and is sent on an idle keep-alive
 * connection (one request in flight per connection, no pipelining); its latency runs from when it
 * was due, so time spent waiting for a free connection counts (no coordinated omission), and so
 * does any lateness of the generator itself. That lateness is measured apart: the scheduler spins
 * (a `setImmediate` loop, yielding to I/O at every turn: the generator has a core of its own), and
 * each request's schedule error is how long after its due time the turn that sent it on its way
 * ran. A figure is only as good as that error is small (bench/phases/half-load.ts judges it).
 * autocannon's own rate option sends each connection's per-second quota back to back at the start
 * of every second, which measures a saturated server in bursts, not a server at half load.
 */
import { once } from 'node:events';
import { connect, type Socket } from 'node:net';
import { LatencyHistogram } from '../stats.js';
import { isExpected, type LoadResult, type LoadSpec } from './types.js';

interface Connection {
  readonly socket: Socket;
  dueAt: number;
  pending: Buffer;
}

export async function runPaced(spec: LoadSpec): Promise<LoadResult> {
  const rate = spec.overallRate;
  if (rate === undefined || rate <= 0) throw new Error('paced load needs overallRate');
  if (spec.requests.length === 0) throw new Error('paced load: no requests');
  const target = new URL(spec.url);
  const payloads = spec.requests.map((r) => {
    const headers = Object.entries(r.headers)
      .map(([name, value]) => `${name}: ${value}\r\n`)
      .join('');
    return Buffer.from(`GET ${r.path} HTTP/1.1\r\nHost: ${target.host}\r\n${headers}\r\n`, 'latin1');
  });
  const histogram = new LatencyHistogram();
  const statusCodes: Record<string, number> = {};
  let errors = 0;
  let bytes = 0;
  let sent = 0;
  const total = Math.round(rate * spec.durationSec);
  let due = 0;
  let answered = 0;
  /** Tick times (ms) of due requests not sent yet. */
  const waiting: number[] = [];
  let waitingHead = 0;
  const idle: Connection[] = [];
  let finish: () => void = () => undefined;
  const finished = new Promise<void>((resolve) => {
    finish = resolve;
  });

  const dispatch = (): void => {
    while (waitingHead < waiting.length && idle.length > 0) {
      const connection = idle.pop();
      const dueAt = waiting[waitingHead];
      const payload = payloads[sent % payloads.length];
      if (connection === undefined || dueAt === undefined || payload === undefined) break;
      waitingHead += 1;
      sent += 1;
      connection.dueAt = dueAt;
      connection.socket.write(payload);
    }
    if (waitingHead > 4096 && waitingHead * 2 > waiting.length) {
      waiting.splice(0, waitingHead);
      waitingHead = 0;
    }
  };

  const onData = (connection: Connection, chunk: Buffer): void => {
    connection.pending = connection.pending.length === 0 ? chunk : Buffer.concat([connection.pending, chunk]);
    for (;;) {
      const headerEnd = connection.pending.indexOf('\r\n\r\n');
      if (headerEnd === -1) return;
      const head = connection.pending.subarray(0, headerEnd).toString('latin1');
      const length = Number(/\r\ncontent-length: *(\d+)/i.exec(head)?.[1] ?? '0');
      const end = headerEnd + 4 + length;
      if (connection.pending.length < end) return;
      const status = head.slice(9, 12);
      statusCodes[status] = (statusCodes[status] ?? 0) + 1;
      bytes += end;
      if (isExpected(spec, Number(status))) histogram.record(performance.now() - connection.dueAt);
      connection.pending = connection.pending.subarray(end);
      answered += 1;
      idle.push(connection);
      if (answered >= total) finish();
    }
  };

  const connections = await Promise.all(
    Array.from({ length: spec.connections }, async () => {
      const socket = connect({ host: target.hostname, port: Number(target.port) });
      socket.setNoDelay(true);
      await once(socket, 'connect');
      const connection: Connection = { socket, dueAt: 0, pending: Buffer.alloc(0) };
      socket.on('data', (chunk: Buffer) => {
        onData(connection, chunk);
        dispatch();
      });
      socket.on('error', () => {
        errors += 1;
      });
      return connection;
    }),
  );
  idle.push(...connections);

  const cpuBefore = process.cpuUsage();
  const startedAt = performance.now();
  const spacingMs = 1000 / rate;
  /** How long after its due time each request was seen due by the scheduler: its own error. */
  const scheduleError = new LatencyHistogram();
  let running = true;
  const schedule = (): void => {
    if (!running) return;
    const now = performance.now();
    const shouldBe = Math.min(total, Math.floor((now - startedAt) / spacingMs) + 1);
    while (due < shouldBe) {
      const dueAt = startedAt + due * spacingMs;
      scheduleError.record(now - dueAt);
      waiting.push(dueAt);
      due += 1;
    }
    dispatch();
    if (due < total) setImmediate(schedule);
  };
  setImmediate(schedule);
  // Answers still missing 5 s after the last request was due count as errors.
  const deadline = setTimeout(finish, spec.durationSec * 1000 + 5_000);
  await finished;
  running = false;
  const elapsedMs = performance.now() - startedAt;
  clearTimeout(deadline);
  const cpu = process.cpuUsage(cpuBefore);
  for (const connection of connections) connection.socket.destroy();
  return {
    generator: 'paced',
    completed: histogram.count,
    responses: answered,
    unexpected: answered - histogram.count,
    errors: errors + (total - answered),
    durationSec: elapsedMs / 1000,
    rps: histogram.count / (elapsedMs / 1000),
    p50Ms: histogram.percentileMs(50),
    p90Ms: histogram.percentileMs(90),
    p99Ms: histogram.percentileMs(99),
    p999Ms: histogram.percentileMs(99.9),
    maxMs: histogram.maxMs,
    bytesPerResponse: bytes / Math.max(1, answered),
    statusCodes,
    clientCpuPct: (100 * (cpu.user + cpu.system)) / (elapsedMs * 1000),
    scheduleErrorP99Ms: scheduleError.percentileMs(99),
    scheduleErrorMaxMs: scheduleError.maxMs,
  };
}
