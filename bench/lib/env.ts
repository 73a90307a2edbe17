/** Settings of the bench and the load test from the environment, checked before anything starts. */

/** An integer setting from `min` to `max`, or `fallback` when unset or empty. */
export function envInt(name: string, fallback: number, min: number, max: number): number {
  const text = process.env[name];
  if (text === undefined || text === '') return fallback;
  if (!/^-?[0-9]{1,9}$/.test(text))
    throw new TypeError(`${name} must be an integer from ${String(min)} to ${String(max)}`);
  const value = Number(text);
  if (value < min || value > max)
    throw new TypeError(`${name} must be an integer from ${String(min)} to ${String(max)}`);
  return value;
}

/** One of `choices`, or the first choice when unset or empty. */
export function envChoice<const T extends string>(name: string, choices: readonly [T, ...T[]]): T {
  const text = process.env[name];
  if (text === undefined || text === '') return choices[0];
  const found = choices.find((choice) => choice === text);
  if (found === undefined) throw new TypeError(`${name} must be one of ${choices.join(', ')}`);
  return found;
}

/** A non-empty setting, or undefined. */
export function envText(name: string): string | undefined {
  const text = process.env[name];
  return text === undefined || text === '' ? undefined : text;
}
