/**
 * zod's `z.fromJSONSchema` in the Worker bundle (wrangler.toml [alias] puts this in place of
 * `zod/v4/classic/from-json-schema.js`; about 5 KiB gzipped): nothing in tailgate or its
 * dependencies turns a JSON Schema into a zod schema (tools' parameters go to the model as JSON
 * Schema). Node and Deno load the real module.
 */
export function fromJSONSchema(): never {
  throw new Error("zod's fromJSONSchema is not part of the tailgate Worker");
}
