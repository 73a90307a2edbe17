/**
 * The bench's load generators and its nginx anchor, for real, in one-second runs: wrk (Debian's;
 * `.ci/run` installs it) sends each request with its own headers and counts answers, statuses and
 * bytes on the wire; autocannon (the fallback) and the paced open-loop generator, each in its own
 * worker process, do the same; nginx with bench/nginx-cache.conf answers every page from its
 * cache once warmed, so its origin sees nothing during a measured round, and its worker's CPU is
 * what the round reads. Figures are checked for what they count, never for speed.
 */
import { once } from 'node:events';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { closedLoopGenerator, runPacedLoad } from '../../bench/lib/load/generators.js';
import type { LoadRequest, LoadResult, LoadSpec } from '../../bench/lib/load/types.js';
import { findNginx, startNginxCache, warmNginx } from '../../bench/lib/nginx.js';
import { stopEverything } from '../../bench/lib/processes.js';
import { measureRound } from '../../bench/lib/rounds.js';
import { baselineServed, startBaseline } from '../../bench/lib/services.js';

const BODY = Buffer.from(JSON.stringify({ data: 'x'.repeat(300), meta: { has_more: false } }));
const REFUSED = Buffer.from('{"code":"rate_limited"}');

/** What the server saw: "path authorization accept-encoding" → count. */
const seen = new Map<string, number>();
const server = createServer((req: IncomingMessage, res: ServerResponse) => {
  const key = `${req.url ?? ''} ${req.headers.authorization ?? '-'} ${req.headers['accept-encoding'] ?? '-'}`;
  seen.set(key, (seen.get(key) ?? 0) + 1);
  // Every answer to a path has the same size, so the bytes on the wire are known.
  res.sendDate = false;
  const body = req.url === '/limited' ? REFUSED : BODY;
  res.writeHead(req.url === '/limited' ? 429 : 200, {
    'content-type': 'application/json',
    'content-length': body.length,
  });
  res.end(body);
});
let url = '';
const workDir = mkdtempSync(join(tmpdir(), 'slab-bench-generators-'));

/** The exact bytes of one answer to `path` on a kept-alive connection, head and body, read from a raw socket. */
async function answerBytes(path: string): Promise<number> {
  const socket = connect(Number(new URL(url).port), '127.0.0.1');
  await once(socket, 'connect');
  socket.write(`GET ${path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`);
  let received = Buffer.alloc(0);
  for (;;) {
    const [chunk] = (await once(socket, 'data')) as [Buffer];
    received = Buffer.concat([received, chunk]);
    const headEnd = received.indexOf('\r\n\r\n');
    const length = Number(/content-length: (\d+)/i.exec(received.subarray(0, headEnd).toString('latin1'))?.[1]);
    if (headEnd !== -1 && received.length >= headEnd + 4 + length) {
      socket.destroy();
      return headEnd + 4 + length;
    }
  }
}

beforeAll(async () => {
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`;
});

afterEach(() => {
  seen.clear();
  delete process.env.BENCH_GENERATOR;
});

afterAll(async () => {
  await stopEverything();
  server.closeAllConnections();
  server.close();
  rmSync(workDir, { recursive: true, force: true });
});

const REQUESTS: LoadRequest[] = [
  { path: '/pages/1', headers: { authorization: 'Bearer one' } },
  { path: '/pages/2', headers: { authorization: 'Bearer two', 'accept-encoding': 'br' } },
];

/** Every request was sent with its own headers, and nothing else was. */
function expectSentAsSpecified(requests: readonly LoadRequest[]): void {
  const expected = requests.map(
    (r) => `${r.path} ${r.headers.authorization ?? '-'} ${r.headers['accept-encoding'] ?? '-'}`,
  );
  expect([...seen.keys()].sort()).toEqual([...new Set(expected)].sort());
}

function expectSaneLatencies(result: LoadResult): void {
  for (const value of [result.p50Ms, result.p90Ms, result.p99Ms, result.maxMs])
    expect(Number.isFinite(value)).toBe(true);
  expect(result.p50Ms).toBeLessThanOrEqual(result.p99Ms);
  expect(result.p99Ms).toBeLessThanOrEqual(result.maxMs);
}

const served = (): number => [...seen.values()].reduce((sum, n) => sum + n, 0);

describe('the closed-loop generators', () => {
  it('wrk sends each request with its own headers, counts statuses when one is expected, and reads the bytes on the wire', async () => {
    const generator = await closedLoopGenerator();
    expect(generator.kind).toBe('wrk');
    const requests = [...REQUESTS, { path: '/limited', headers: { authorization: 'Bearer three' } }];
    const spec: LoadSpec = { url, connections: 2, durationSec: 1, expectStatus: 200, requests };
    const result = await generator.run(spec, workDir, 'wrk-test');
    expectSentAsSpecified(requests);
    expect(result.generator).toBe('wrk');
    expect(result.responses).toBeGreaterThan(30);
    // Answers in flight when wrk stops reach the server but not wrk's count.
    expect(served() - result.responses).toBeGreaterThanOrEqual(0);
    expect(served() - result.responses).toBeLessThanOrEqual(spec.connections);
    const ok = result.statusCodes['200'] ?? 0;
    const refused = result.statusCodes['429'] ?? 0;
    expect(ok + refused).toBe(result.responses);
    expect(result.completed).toBe(ok);
    expect(result.unexpected).toBe(refused);
    expect(Math.abs(ok - 2 * refused)).toBeLessThanOrEqual(spec.connections + 1);
    const expectedBytes =
      (ok * (await answerBytes('/pages/1')) + refused * (await answerBytes('/limited'))) / result.responses;
    expect(Math.abs(result.bytesPerResponse - expectedBytes) / expectedBytes).toBeLessThan(0.01);
    expect(result.errors).toBe(0);
    expect(result.clientCpuPct).toBeGreaterThan(0);
    expectSaneLatencies(result);
  });

  it('autocannon, the fallback (BENCH_GENERATOR=autocannon), does the same in its own worker process', async () => {
    process.env.BENCH_GENERATOR = 'autocannon';
    const generator = await closedLoopGenerator();
    expect(generator.kind).toBe('autocannon');
    const result = await generator.run(
      { url, connections: 2, durationSec: 1, requests: REQUESTS },
      workDir,
      'autocannon-test',
    );
    expectSentAsSpecified(REQUESTS);
    expect(result.generator).toBe('autocannon');
    expect(result.completed).toBeGreaterThan(30);
    expect(result.unexpected).toBe(0);
    expect(result.statusCodes).toEqual({ '200': result.responses });
    expect(served() - result.responses).toBeGreaterThanOrEqual(0);
    expect(served() - result.responses).toBeLessThanOrEqual(2);
    expect(result.bytesPerResponse).toBe(await answerBytes('/pages/1'));
    expectSaneLatencies(result);
  });
});

describe('the paced generator', () => {
  it('sends exactly rate × seconds requests, each with its own headers, open loop', async () => {
    const result = await runPacedLoad(
      { url, connections: 4, durationSec: 1, overallRate: 150, requests: REQUESTS },
      workDir,
      'paced-test',
    );
    expectSentAsSpecified(REQUESTS);
    expect(result.generator).toBe('paced');
    expect(result.completed).toBe(150);
    expect(served()).toBe(150);
    expect(result.errors).toBe(0);
    expect(result.bytesPerResponse).toBe(await answerBytes('/pages/1'));
    // Its own schedule error is measured and reported beside the figures, and is small on an idle
    // loopback server: a spinning scheduler sees each request due within the turn it became due.
    expect(result.scheduleErrorP99Ms).toBeGreaterThanOrEqual(0);
    expect(result.scheduleErrorMaxMs).toBeGreaterThanOrEqual(result.scheduleErrorP99Ms ?? Number.NaN);
    expectSaneLatencies(result);
  });
});

describe('the nginx proxy_cache anchor', () => {
  it('answers every page from its cache once warmed: its origin sees nothing during a round, whose CPU is the worker’s', async () => {
    const nginx = await findNginx();
    if ('missing' in nginx) throw new Error(nginx.missing);
    const pages = { '/api/a?per_page=30': BODY.toString('base64'), '/api/b?per_page=30': REFUSED.toString('base64') };
    const pagesFile = join(workDir, 'pages.json');
    writeFileSync(pagesFile, JSON.stringify(pages));
    const origin = await startBaseline('origin', pagesFile);
    const cache = await startNginxCache(nginx.path, { dir: join(workDir, 'nginx'), originUrl: origin.url });
    expect(cache.workerPids()).toHaveLength(1);
    await warmNginx(cache.url, Object.keys(pages));
    expect(await baselineServed(origin.url)).toBe(2);

    const generator = await closedLoopGenerator();
    const requests = Object.keys(pages).map((path) => ({ path, headers: { authorization: 'Bearer one' } }));
    const round = await measureRound(
      { url: cache.url, pids: cache.workerPids },
      { url: cache.url, connections: 2, durationSec: 1, requests },
      (spec, label) => generator.run(spec, workDir, label),
      'nginx-test',
    );
    expect(round.load.responses).toBeGreaterThan(30);
    expect(round.load.unexpected).toBe(0);
    expect(await baselineServed(origin.url)).toBe(2);
    expect(round.serverUsPerRequest).toBeGreaterThan(0);
    expect(Number.isFinite(round.serverCpuPct)).toBe(true);
  });
});
