/** What a load test's report is made of: the run's stamp, machine, settings, topology and figures. */
import type { RedisMode } from '../lib/services.js';
import type { LoadtestResult } from '../loadgen/types.js';
import type { LoadtestFreshness } from '../loadtest-freshness.js';

export interface LoadtestTopology {
  readonly redis: { readonly mode: RedisMode; readonly description: string; readonly nodes: readonly string[] };
  readonly sandbox: string;
  readonly replicas: readonly string[];
  readonly balancer: string;
  readonly generator: string;
}

export interface LoadtestReport {
  /** e.g. "`npm run loadtest`, 2026-11-23, 2 cores, …": where the figures come from. */
  readonly stamp: string;
  readonly date: string;
  readonly machine: { readonly cores: number; readonly cpu: string; readonly node: string };
  readonly settings: {
    readonly seconds: number;
    readonly connections: number;
    readonly replicas: number;
    readonly redis: RedisMode;
  };
  readonly topology: LoadtestTopology;
  readonly result: LoadtestResult;
  /** The freshness phase's figures; absent when LOADTEST_FRESHNESS_SECONDS=0. */
  readonly freshness?: LoadtestFreshness;
}
