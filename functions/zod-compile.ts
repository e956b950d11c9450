/**
 * zod's ahead-of-time compiler (`z.compile`, `zod/v4/core/compile.js`) in the Worker bundle
 * (wrangler.toml [alias] puts this in its place; about 7 KiB gzipped). It generates each
 * parser with `new Function`, which workerd refuses, so on Workers `compile` hands the schema
 * back unchanged, as here; nothing in tailgate or its dependencies calls it (nor imports
 * `zod/compile`, which would install it for every schema). Node and Deno load the real module.
 */

/** The sentinel a compiled parser returns for input it rejects. */
export const INVALID: unique symbol = Symbol.for('zod.compile.invalid') as never;

export class ZodCompileAsyncError extends Error {}

export class ZodCompileUnsupportedError extends Error {}

/** The schema itself: no parser can be generated here (`{strict: true}` says so instead). */
export function compile<Schema>(schema: Schema, options?: { strict?: boolean }): Schema {
  if (options?.strict) throw new ZodCompileUnsupportedError('this runtime (zod compiles with new Function)');
  return schema;
}

function unavailable(): never {
  throw new Error("zod's compiler is not part of the tailgate Worker");
}

export function withParser(): never {
  return unavailable();
}

export function compileFn(): never {
  return unavailable();
}
