/** The bench's verdicts and its lines for the docs (bench/report.ts), from made-up figures. */
import { describe, expect, it } from 'vitest';
import type { Summary } from '../../bench/lib/rounds.js';
import { benchMarkdown, type TargetFigures, type Verdict, verdicts } from '../../bench/report.js';

function summary(rps: number, usPerRequest: number, p99Ms: number): Summary {
  return {
    rounds: 1,
    rps,
    p50Ms: 1,
    p99Ms,
    serverCpuPct: 99,
    usPerRequest,
    clientCpuPct: 50,
    bytesPerResponse: 6000,
    unexpected: 0,
    errors: 0,
    rpsByRound: [rps],
  };
}

function target(
  name: string,
  ratio: number,
  cpuRatio: number,
  p99Ms: number,
  halfLoadP99Ms: number,
  halfLoadGeneratorErrorP99Ms = 0.05,
): TargetFigures {
  const s = summary(30_000 * ratio, 20 / cpuRatio, p99Ms);
  return {
    name,
    fiftyPages: s,
    onePage: s,
    ratioFiftyPages: ratio,
    ratioOnePage: ratio,
    cpuRatioFiftyPages: cpuRatio,
    cpuRatioOnePage: cpuRatio,
    halfLoadP99Ms,
    halfLoadGeneratorErrorP99Ms,
  };
}

const BARE = target('bare node:http', 1, 1, 1, 0.6);
/** The resume and the allocation verdicts (the last three) of a run without those phases. */
const NOT_RUN = [undefined, undefined, undefined];

const rest = {
  upstream: { requests: 0, allowed: 12 },
  coalesced: { requests: 500, upstream: 1, pass: true },
  stored: { ratio: 0.2, target: 0.25, pass: true },
  rateLimited: { usPerRequest: 60, target: 1000, other: 0, pass: true },
  generator: 'wrk 4.1.0',
};

describe('the bench’s verdicts', () => {
  it('judges the hit ratio, p99 against HAProxy and nginx at full load and nginx at half load by the targets', () => {
    const pass = verdicts({
      ...rest,
      bare: BARE,
      proxy: target('proxy cache hits', 0.72, 0.75, 2.9, 1.9),
      nginx: target('nginx proxy_cache', 0.9, 0.9, 1.5, 1),
      haproxy: target('HAProxy, the same job', 1.1, 1.1, 1.6, 1),
    });
    // The br verdict (sixth), the resume and the allocation verdicts (the last three): not in this run.
    expect(pass.map((v) => v.pass)).toEqual([
      true,
      true,
      true,
      true,
      true,
      undefined,
      true,
      true,
      true,
      true,
      ...NOT_RUN,
    ]);
    expect(pass[0]?.figure).toBe("0.72× (HAProxy 1.10×); CPU per hit 1.33× bare's (by CPU 0.75×)");
    expect(pass[2]?.figure).toBe('2.90 ms; HAProxy 1.60 ms (1.8×), nginx 1.50 ms (1.9×)');
    // Upstream requests beyond the expiring pages' refreshes are a miss.
    const miss = verdicts({
      ...rest,
      bare: BARE,
      upstream: { requests: 13, allowed: 12 },
      proxy: target('proxy cache hits', 0.55, 0.4, 6, 2.5),
      nginx: target('nginx proxy_cache', 0.9, 0.9, 1.5, 1),
      haproxy: target('HAProxy, the same job', 1.1, 1.1, 1.6, 1),
    });
    expect(miss.map((v) => v.pass)).toEqual([
      false,
      false,
      false,
      false,
      false,
      undefined,
      false,
      true,
      true,
      true,
      ...NOT_RUN,
    ]);
    expect(miss[2]?.figure).toBe('6.00 ms; HAProxy 1.60 ms (3.8×), nginx 1.50 ms (4.0×)');
    expect(miss[6]?.figure).toBe('13 (at most 12)');
  });

  it('judges the p99 against every anchor that ran: under 2× nginx’s but over 2× HAProxy’s is a miss', () => {
    const list = verdicts({
      ...rest,
      bare: BARE,
      proxy: target('proxy cache hits', 0.72, 0.75, 2.9, 1.9),
      nginx: target('nginx proxy_cache', 0.9, 0.9, 1.5, 1),
      haproxy: target('HAProxy, the same job', 1.1, 1.1, 1.4, 1),
    });
    expect(list[2]).toMatchObject({ pass: false, figure: '2.90 ms; HAProxy 1.40 ms (2.1×), nginx 1.50 ms (1.9×)' });
  });

  it('judges the hit ratio and its CPU together: a ratio met with too much CPU per hit is a miss', () => {
    const list = verdicts({
      ...rest,
      bare: BARE,
      proxy: target('proxy cache hits', 0.72, 0.6, 2.9, 1.9),
      nginx: target('nginx proxy_cache', 0.9, 0.9, 1.5, 1),
    });
    expect(list[0]).toMatchObject({ pass: false, figure: "0.72×; CPU per hit 1.67× bare's (by CPU 0.60×)" });
  });

  it('judges what a hit allocates against the bare server, the collector’s pauses, and the first second after idling', () => {
    const gc = (bytesPerAnswer: number, longestScavengeMs: number, fullCollections: number) => ({
      collections: 100,
      bytesPerAnswer,
      promotedPerAnswer: 2,
      scavenges: 100,
      medianScavengeMs: 1,
      longestScavengeMs,
      fullCollections,
      longestFullMs: fullCollections === 0 ? 0 : 12,
      answers: 600_000,
      seconds: 60,
    });
    const judged = (proxyBytes: number, longest: number, full: number, first: number) =>
      verdicts({
        ...rest,
        bare: BARE,
        proxy: target('proxy cache hits', 0.72, 0.75, 2.9, 1.9),
        nginx: target('nginx proxy_cache', 0.9, 0.9, 1.5, 1),
        allocation: { bare: gc(5_000, 0.8, 0), proxy: gc(proxyBytes, longest, full) },
        resume: { idleSeconds: 10, firstP99Ms: first, steadyP99Ms: 2 },
      }).slice(-3);
    expect(judged(7_400, 2.5, 0, 3.9).map((v) => v.pass)).toEqual([true, true, true]);
    expect(judged(7_400, 2.5, 0, 3.9)[0]?.figure).toBe('after 10 s idle: 3.90 vs 2.00 ms (1.95×)');
    expect(judged(7_400, 2.5, 0, 3.9)[1]?.figure).toBe('7,400 vs 5,000 B (1.48×); promoted 2.0 vs 2.0 B');
    expect(judged(7_600, 2.5, 0, 4.1).map((v) => v.pass)).toEqual([false, false, true]);
    expect(judged(7_400, 3.5, 0, 3.9)[2]?.pass).toBe(false); // a young pause over 3 ms
    expect(judged(7_400, 2.5, 1, 3.9)[2]?.pass).toBe(false); // a full collection
  });

  it('gives no half-load verdict when its ruler cannot see a tail: slow anchors, or a late generator', () => {
    const proxy = target('proxy cache hits', 0.72, 0.75, 2.9, 9);
    const judged = (nginx: TargetFigures, bare: TargetFigures): Verdict | undefined =>
      verdicts({ ...rest, bare, proxy, nginx })[4];
    // nginx's own p99 at half load over 2 ms: the generator (or the machine) is the limit.
    expect(judged(target('nginx proxy_cache', 0.9, 0.9, 1.5, 17.36), BARE)).toMatchObject({
      pass: undefined,
      figure: expect.stringContaining('the generator is the limit, no verdict'),
    });
    // The bare server's p99 over 2 ms, likewise.
    expect(judged(target('nginx proxy_cache', 0.9, 0.9, 1.5, 1), target('bare node:http', 1, 1, 1, 7.96))?.pass).toBe(
      undefined,
    );
    // The generator's own schedule error over 1 ms.
    expect(judged(target('nginx proxy_cache', 0.9, 0.9, 1.5, 1, 1.4), BARE)?.figure).toContain(
      'generator error p99 1.400 ms: the generator is the limit',
    );
    // A ruler that can see: judged against 2× nginx's.
    expect(judged(target('nginx proxy_cache', 0.9, 0.9, 1.5, 1), BARE)?.pass).toBe(false);
  });

  it('judges a br hit by its body and its CPU against an identity hit’s', () => {
    const identity = target('proxy cache hits', 0.6, 0.5, 3, 4);
    const br = (cpuRatio: number): TargetFigures => {
      const figures = target('proxy br hits', 0.6, cpuRatio, 3, 4);
      const fiftyPages = { ...figures.fiftyPages, bytesPerResponse: 1_400 };
      return { ...figures, fiftyPages };
    };
    const judged = (proxyBr: TargetFigures, brBody: number): Verdict | undefined =>
      verdicts({
        ...rest,
        proxy: identity,
        proxyBr,
        bodies: { identity: 5_600, br: brBody },
        nginx: undefined,
        bare: BARE,
      })[5];
    expect(judged(br(0.5), 850)?.pass).toBe(true); // 0.15× the body, the same CPU
    expect(judged(br(0.5), 1_200)?.pass).toBe(false); // 0.21× the body
    expect(judged(br(0.45), 850)?.pass).toBe(false); // more CPU per hit than identity
    expect(judged(br(0.5), 850)?.figure).toBe(
      'body 850 vs 5,600 B (0.15×), with headers 1,400 vs 6,000 B (0.23×); 40.0 vs 40.0 µs CPU (1.00×)',
    );
    // Without the bodies (or without br hits) it is not judged.
    expect(
      verdicts({ ...rest, proxy: identity, proxyBr: br(0.5), nginx: undefined, bare: BARE })[5]?.pass,
    ).toBeUndefined();
  });

  it('cannot judge the p99 without an anchor, and says so', () => {
    const list = verdicts({ ...rest, proxy: target('proxy cache hits', 0.7, 0.6, 3, 4), nginx: undefined, bare: BARE });
    expect(list[2]).toMatchObject({ pass: undefined, figure: '3.00 ms; no anchor in this run' });
    expect(benchMarkdown('stamp', [], list, { busyRounds: 0, rounds: 30 })).toContain(
      `| ${list[2]?.target ?? ''} | 3.00 ms; no anchor in this run | n/a |`,
    );
  });

  it('warns in the lines for the docs when rounds ran on a busy machine, and only then', () => {
    const list = verdicts({ ...rest, proxy: target('proxy cache hits', 0.7, 0.6, 3, 4), nginx: undefined, bare: BARE });
    expect(benchMarkdown('stamp', [], list, { busyRounds: 0, rounds: 30 }).join('\n')).not.toContain('Busy machine');
    expect(benchMarkdown('stamp', [], list, { busyRounds: 7, rounds: 30 }).join('\n')).toContain(
      'Busy machine: in 7 of 30 closed-loop rounds',
    );
  });
});
