/**
 * Maps `values` through `task` with at most `limit` tasks in flight (a Worker has six
 * simultaneous connections), keeping the order of `values` in the result.
 */
export async function mapLimit<Value, Result>(
  values: readonly Value[],
  limit: number,
  task: (value: Value, index: number) => Promise<Result>,
): Promise<Result[]> {
  const results = new Array<Result>(values.length);
  let next = 0;
  const worker = async () => {
    while (next < values.length) {
      const index = next++;
      results[index] = await task(values[index]!, index);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, values.length) }, worker));
  return results;
}
