// The package's ES module build by its file (functions/zod-to-openapi-no-generators.ts imports it
// by that text, which wrangler.toml [alias] does not swap): the package's own types.
declare module '@asteasolutions/zod-to-openapi/dist/index.mjs' {
  export * from '@asteasolutions/zod-to-openapi';
}
