import fc from 'fast-check';

/** Arbitraries of values near stored items, for the property tests of the schemas' fast paths. */

/** What a validation gives: the value as JSON (its keys in order), or the error's message and details. */
export function outcome(validate: () => unknown): unknown {
  try {
    return { value: JSON.stringify(validate()) };
  } catch (error) {
    const { message, details } = error as { message: string; details?: unknown };
    return { message, details };
  }
}

export const text = fc.oneof(
  fc.constantFrom('', 'x', 'é', '\u{1D11E}'),
  fc.integer({ min: 254, max: 258 }).map((length) => 'c'.repeat(length)),
  fc.string({ maxLength: 8 }),
);

/** A field's value: mostly the right kind, sometimes not. */
export const field = fc.oneof(
  { weight: 6, arbitrary: text },
  fc.constantFrom('system', 'user', 'assistant', 'tool', 'message', 'function_call', 'function_call_output'),
  fc.constantFrom(0, -1, 1, 1.5, 2 ** 53, null, true, false),
  fc.constant([{ type: 'input_text', text: 'p' }]),
  fc.constant({}),
);

/**
 * Objects near an item: one of `orders` (an item's keys), in its order or reversed, a key or two
 * left out or added, values mostly `valid` ones, the type mostly the keys' own.
 */
export function nearItem(orders: string[][], valid: Record<string, fc.Arbitrary<unknown>>): fc.Arbitrary<object> {
  const keys = Object.keys(valid);
  return fc
    .tuple(
      fc.constantFrom(...orders),
      fc.oneof(
        { weight: 4, arbitrary: fc.constant(null) },
        fc.constantFrom('message', 'function_call', 'function_call_output', 'notice', 3),
      ),
      fc.record(
        Object.fromEntries(keys.map((key) => [key, fc.oneof({ weight: 8, arbitrary: valid[key]! }, field)])) as Record<
          string,
          fc.Arbitrary<unknown>
        >,
      ),
      fc.oneof({ weight: 3, arbitrary: fc.constant<string[]>([]) }, fc.subarray(keys, { maxLength: 2 })),
      fc.oneof({ weight: 3, arbitrary: fc.constant(false) }, fc.constant(true)),
    )
    .map(([order, type, values, toggled, shuffle]) => {
      // A toggled key is left out when the type has it, added when it has not.
      const names = [
        ...order.filter((key) => !toggled.includes(key)),
        ...toggled.filter((key) => !order.includes(key)),
      ];
      if (shuffle) names.reverse();
      const own = order.includes('role')
        ? 'message'
        : order.includes('name')
          ? 'function_call'
          : 'function_call_output';
      return Object.fromEntries(names.map((key) => [key, key === 'type' ? (type ?? own) : values[key]]));
    });
}

/** A valid value of each field of a stored item, and of one no item has (`extra`): `nearItem` mostly takes these. */
export const validFields: Record<string, fc.Arbitrary<unknown>> = {
  role: fc.constantFrom('system', 'user', 'assistant'),
  content: text,
  call_id: fc.string({ minLength: 1, maxLength: 8 }),
  name: fc.string({ minLength: 1, maxLength: 8 }),
  arguments: text,
  output: text,
  seq: fc.oneof(fc.integer({ min: 1, max: 1000 }), fc.constant(2 ** 53 - 1)),
  created_at: text,
  extra: text,
};
