import { createRequire } from 'node:module';
import { dirname } from 'node:path';
import { expect, it } from 'vitest';

// wrangler.toml [alias] puts functions/zod-to-openapi-no-generators.ts in place of
// @asteasolutions/zod-to-openapi for @hono/zod-openapi, its one importer in the Worker; the stand-in
// passes on the registry and metadata of the copy functions/ resolves (package.json pins it). An
// update after which @hono/zod-openapi resolves a copy of its own (its range no longer met by the
// pin, so npm nests another version under it) would have the Worker bundle the pinned copy in its
// place, a version @hono/zod-openapi was not built against, with no build error.
it('passes on the copy of zod-to-openapi that @hono/zod-openapi resolves', () => {
  const fromFunctions = createRequire(new URL('../../functions/', import.meta.url));
  const fromHono = createRequire(fromFunctions.resolve('@hono/zod-openapi'));
  const packageOf = (require: NodeJS.Require) =>
    dirname(require.resolve('@asteasolutions/zod-to-openapi/package.json'));
  expect(packageOf(fromHono)).toBe(packageOf(fromFunctions));
});
