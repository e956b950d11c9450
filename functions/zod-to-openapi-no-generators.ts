export {
  extendZodWithOpenApi,
  getOpenApiMetadata,
  OpenAPIRegistry,
} from '@asteasolutions/zod-to-openapi/dist/index.mjs';

/**
 * @asteasolutions/zod-to-openapi's document generators in the Worker (wrangler.toml [alias] puts
 * this module in place of the package for @hono/zod-openapi, its only importer there): none. The
 * Worker serves the document `npm run assets` generated (functions/openapi-asset.ts) and never
 * calls `getOpenAPIDocument`; the routes' registry and zod's OpenAPI metadata are the package's own.
 */
export class OpenApiGeneratorV3 {
  constructor() {
    throw new Error('the Worker generates no OpenAPI document: it serves the one `npm run assets` wrote');
  }
}
export class OpenApiGeneratorV31 extends OpenApiGeneratorV3 {}
