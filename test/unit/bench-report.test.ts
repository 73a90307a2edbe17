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

function target(name: string, ratio: number, cpuRatio: number, p99Ms: number, halfLoadP99Ms: number): TargetFigures {
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
  };
}

const rest = {
  upstreamDuringHits: 0,
  coalesced: { requests: 500, upstream: 1, pass: true },
  stored: { ratio: 0.2, target: 0.25, pass: true },
  rateLimited: { usPerRequest: 60, target: 1000, other: 0, pass: true },
  generator: 'wrk 4.1.0',
};

describe('the bench’s verdicts', () => {
  it('judges the hit ratio, p99 against nginx and at half load by issue 11’s targets', () => {
    const pass = verdicts({
      ...rest,
      proxy: target('proxy cache hits', 0.72, 0.65, 3, 4),
      nginx: target('nginx proxy_cache', 0.9, 0.9, 1.5, 1),
    });
    // The br verdict (fifth) cannot be judged without br hits in the run.
    expect(pass.map((v) => v.pass)).toEqual([true, true, true, true, undefined, true, true, true, true]);
    expect(pass[0]?.figure).toBe('0.72× (goal met); by CPU per request 0.65×');
    const miss = verdicts({
      ...rest,
      upstreamDuringHits: 3,
      proxy: target('proxy cache hits', 0.55, 0.4, 6, 5.5),
      nginx: target('nginx proxy_cache', 0.9, 0.9, 1.5, 1),
    });
    expect(miss.map((v) => v.pass)).toEqual([false, false, false, false, undefined, false, true, true, true]);
    expect(miss[2]?.figure).toBe('6.00 vs 1.50 ms (4.0×)');
  });

  it('judges a br hit by its body and its CPU against an identity hit’s', () => {
    const identity = target('proxy cache hits', 0.6, 0.5, 3, 4);
    const br = (cpuRatio: number): TargetFigures => {
      const figures = target('proxy br hits', 0.6, cpuRatio, 3, 4);
      const fiftyPages = { ...figures.fiftyPages, bytesPerResponse: 1_400 };
      return { ...figures, fiftyPages };
    };
    const judged = (proxyBr: TargetFigures, brBody: number): Verdict | undefined =>
      verdicts({ ...rest, proxy: identity, proxyBr, bodies: { identity: 5_600, br: brBody }, nginx: undefined })[4];
    expect(judged(br(0.5), 850)?.pass).toBe(true); // 0.15× the body, the same CPU
    expect(judged(br(0.5), 1_200)?.pass).toBe(false); // 0.21× the body
    expect(judged(br(0.45), 850)?.pass).toBe(false); // more CPU per hit than identity
    expect(judged(br(0.5), 850)?.figure).toBe(
      'body 850 vs 5,600 B (0.15×), with headers 1,400 vs 6,000 B (0.23×); 40.0 vs 40.0 µs CPU (1.00×)',
    );
    // Without the bodies (or without br hits) it is not judged.
    expect(verdicts({ ...rest, proxy: identity, proxyBr: br(0.5), nginx: undefined })[4]?.pass).toBeUndefined();
  });

  it('cannot judge the p99 against nginx without nginx, and says so', () => {
    const list = verdicts({ ...rest, proxy: target('proxy cache hits', 0.7, 0.6, 3, 4), nginx: undefined });
    expect(list[2]).toMatchObject({ pass: undefined, figure: '3.00 ms; no nginx in this run' });
    expect(benchMarkdown('stamp', [], list, { busyRounds: 0, rounds: 30 })).toContain(
      `| ${list[2]?.target ?? ''} | 3.00 ms; no nginx in this run | n/a |`,
    );
  });

  it('warns in the lines for the docs when rounds ran on a busy machine, and only then', () => {
    const list = verdicts({ ...rest, proxy: target('proxy cache hits', 0.7, 0.6, 3, 4), nginx: undefined });
    expect(benchMarkdown('stamp', [], list, { busyRounds: 0, rounds: 30 }).join('\n')).not.toContain('Busy machine');
    expect(benchMarkdown('stamp', [], list, { busyRounds: 7, rounds: 30 }).join('\n')).toContain(
      'Busy machine: in 7 of 30 closed-loop rounds',
    );
  });
});
