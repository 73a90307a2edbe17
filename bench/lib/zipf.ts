/** Skewed picks for the readers of the load test and the bench: a few pages read far more than the rest. */

/** A skewed pick: index i with probability ∝ 1 / (i + 1) (Zipf, s = 1). */
export function zipfPicker(count: number): () => number {
  const cumulative: number[] = [];
  let total = 0;
  for (let i = 0; i < count; i++) {
    total += 1 / (i + 1);
    cumulative.push(total);
  }
  return () => {
    const x = Math.random() * total;
    let low = 0;
    let high = count - 1;
    while (low < high) {
      const mid = (low + high) >> 1;
      if ((cumulative[mid] ?? total) < x) low = mid + 1;
      else high = mid;
    }
    return low;
  };
}
