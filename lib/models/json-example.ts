import type { JsonSchema } from './model.ts';

/**
 * A JSON value that validates against `schema`, for the echo model's structured output: the
 * first of `const`, `enum`, `default` or `examples`; else by `type`, an object with every
 * property (required ones at least), an array of `minItems` elements, a string (`text`,
 * padded or cut to the length bounds; a `format: date-time` string is the epoch), the
 * smallest number within the bounds, `false` or `null`. `anyOf`/`oneOf` take their first
 * branch, `allOf` merges its branches' properties, local `$ref`s (`#/$defs/...`) are followed.
 * Patterns and other keywords are not read: a schema that needs them gets a value that may not
 * validate.
 *
 * @example jsonExample({ type: 'object', properties: { a: { type: 'integer', minimum: 2 } } }, 'x') // { a: 2 }
 */
export function jsonExample(schema: JsonSchema, text: string, root: JsonSchema = schema, depth = 0): unknown {
  if (depth > 32) return null;
  const next = (child: unknown) => jsonExample((child ?? {}) as JsonSchema, text, root, depth + 1);
  if (typeof schema.$ref === 'string' && schema.$ref.startsWith('#/')) {
    const target = schema.$ref
      .slice(2)
      .split('/')
      .reduce<unknown>((node, key) => (node as Record<string, unknown> | undefined)?.[key], root);
    return next(target);
  }
  if ('const' in schema) return schema.const;
  for (const key of ['enum', 'examples'] as const) if (Array.isArray(schema[key])) return schema[key][0];
  if ('default' in schema) return schema.default;
  for (const key of ['anyOf', 'oneOf'] as const) if (Array.isArray(schema[key])) return next(schema[key][0]);
  if (Array.isArray(schema.allOf)) {
    const merged = schema.allOf.map((part) => next(part));
    return merged.every((value) => typeof value === 'object' && value !== null && !Array.isArray(value))
      ? Object.assign({}, ...merged)
      : merged[0];
  }
  const type = Array.isArray(schema.type) ? schema.type.find((entry) => entry !== 'null') : schema.type;
  switch (type ?? (schema.properties ? 'object' : schema.items ? 'array' : 'string')) {
    case 'object': {
      const properties = (schema.properties ?? {}) as Record<string, unknown>;
      return Object.fromEntries(Object.entries(properties).map(([key, child]) => [key, next(child)]));
    }
    case 'array': {
      const count = typeof schema.minItems === 'number' ? schema.minItems : 0;
      return Array.from({ length: count }, () => next(schema.items));
    }
    case 'string':
      return stringExample(schema, text);
    case 'integer':
    case 'number':
      return numberExample(schema, type === 'integer');
    case 'boolean':
      return false;
    default:
      return null;
  }
}

function stringExample(schema: JsonSchema, text: string): string {
  if (schema.format === 'date-time') return new Date(0).toISOString();
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0;
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : Number.POSITIVE_INFINITY;
  return text.padEnd(min, '.').slice(0, max);
}

function numberExample(schema: JsonSchema, integer: boolean): number {
  const bound = (key: string) => (typeof schema[key] === 'number' ? (schema[key] as number) : undefined);
  const low = bound('minimum') ?? (bound('exclusiveMinimum') !== undefined ? bound('exclusiveMinimum')! + 1 : 0);
  const high = bound('maximum') ?? (bound('exclusiveMaximum') !== undefined ? bound('exclusiveMaximum')! - 1 : low);
  const value = Math.min(low, high);
  return integer ? Math.ceil(value) : value;
}
