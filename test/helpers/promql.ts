/**
 * The PromQL in deploy/observability/, read with the Prometheus project's own PromQL grammar
 * (@prometheus-io/lezer-promql): each expression must parse, and yields the metric names it
 * selects, so tests can hold the dashboard and the alert rules to what `/metrics` exposes.
 */
import { readFileSync } from 'node:fs';
import { parser } from '@prometheus-io/lezer-promql';
import { parse as parseYaml } from 'yaml';

export const DASHBOARD_FILE = 'deploy/observability/grafana/slab-ops-proxy.json';
export const RULES_FILE = 'deploy/observability/prometheus/slab-ops-proxy.rules.yaml';
export const RULES_TEST_FILE = 'deploy/observability/prometheus/slab-ops-proxy.rules.test.yaml';

/**
 * Grafana's variables as Prometheus would see them once Grafana has substituted them: the range
 * `$__rate_interval` becomes a duration; `$job`, `$instance` only ever appear inside quoted
 * label matchers, where any text parses.
 */
function withGrafanaVariables(expression: string): string {
  return expression.replace(/\$__rate_interval|\$__interval|\$__range/g, '5m');
}

/** The metric names an expression selects; throws when it is not valid PromQL. */
export function metricNames(expression: string): string[] {
  const text = withGrafanaVariables(expression);
  const names = new Set<string>();
  const errors: number[] = [];
  parser.parse(text).iterate({
    enter(node) {
      if (node.type.isError) errors.push(node.from);
      if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector')
        names.add(text.slice(node.from, node.to));
    },
  });
  if (errors.length > 0) throw new Error(`not PromQL at ${String(errors[0])}: ${expression}`);
  return [...names];
}

export interface DashboardPanel {
  readonly id: number;
  readonly type: string;
  readonly title: string;
  readonly gridPos: { readonly x: number; readonly y: number; readonly w: number; readonly h: number };
  readonly datasource?: { readonly type: string; readonly uid: string };
  readonly targets?: ReadonlyArray<{
    readonly expr: string;
    readonly refId: string;
    readonly datasource?: { readonly uid: string };
  }>;
}

export interface Dashboard {
  readonly uid: string;
  readonly title: string;
  readonly schemaVersion: number;
  readonly templating: {
    readonly list: ReadonlyArray<{ readonly name: string; readonly type: string; readonly query?: unknown }>;
  };
  readonly panels: readonly DashboardPanel[];
}

export function readDashboard(): Dashboard {
  return JSON.parse(readFileSync(DASHBOARD_FILE, 'utf8')) as Dashboard;
}

export interface AlertRule {
  readonly alert: string;
  readonly expr: string;
  readonly for?: string;
  readonly labels?: Record<string, string>;
  readonly annotations?: Record<string, string>;
}

export function readRules(): {
  readonly groups: ReadonlyArray<{ readonly name: string; readonly rules: readonly AlertRule[] }>;
} {
  return parseYaml(readFileSync(RULES_FILE, 'utf8')) as { groups: Array<{ name: string; rules: AlertRule[] }> };
}

/** Every expression of the dashboard's panels and the rules file. */
export function observabilityExpressions(): string[] {
  const dashboard = readDashboard().panels.flatMap((panel) => (panel.targets ?? []).map((target) => target.expr));
  const variables = readDashboard().templating.list.flatMap((variable) => {
    const query = variable.query;
    const text = typeof query === 'object' && query !== null && 'query' in query ? String(query.query) : '';
    // label_values(selector, label): the selector is PromQL.
    const selector = /^label_values\((.+), *[a-z_]+\)$/.exec(text)?.[1];
    return selector === undefined ? [] : [selector];
  });
  const rules = readRules().groups.flatMap((group) => group.rules.map((rule) => rule.expr));
  return [...dashboard, ...variables, ...rules];
}
