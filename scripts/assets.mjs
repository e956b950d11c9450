// Fills .assets/, the files the Worker serves as static assets (wrangler.toml `[assets]`; Node
// and Deno read them through functions/local-server.ts): a copy of the /docs page's script, and
// the /ui inspector's script bundled from its modules (functions/ui/client/, entry main.ts); and
// the inspector's page, stylesheet and icon (functions/ui/inspector-files.ts), which the Worker
// reads through its ASSETS binding (Node and Deno from the modules themselves); and the OpenAPI
// document of the Worker's app (functions/openapi-document.ts), which the Worker reads through
// that binding too (functions/openapi-asset.ts) where Node and Deno generate it. Run by npm
// install (without the document), before start, start:node, start:deno and build, by wrangler
// before it bundles or serves the Worker (wrangler.toml [build]), and by the node tests' global setup
// (test/support/global-setup.ts), so no test loads a stale bundle. A file already there with
// the same bytes is left alone: `wrangler dev` watches .assets/ and restarts its worker on any
// write, so a second `npm start` would restart the first one's worker mid-request.
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { build } from 'esbuild';

function update(target, bytes) {
  mkdirSync(dirname(target), { recursive: true });
  if (!existsSync(target) || !readFileSync(target).equals(bytes)) writeFileSync(target, bytes);
}

update(
  '.assets/docs/scalar-api-reference.js',
  readFileSync('node_modules/@scalar/api-reference/dist/browser/standalone.js'),
);

// One script (an IIFE, unminified: it is read in the browser's tools).
const inspector = await build({
  entryPoints: ['functions/ui/client/main.ts'],
  bundle: true,
  format: 'iife',
  target: 'es2022',
  legalComments: 'none',
  write: false,
  logLevel: 'error',
});
update('.assets/ui/app.js', Buffer.from(inspector.outputFiles[0].contents));

// The inspector's page, stylesheet and icon, as the modules hold them.
const files = await build({
  entryPoints: ['functions/ui/inspector-files.ts'],
  bundle: true,
  format: 'esm',
  external: ['hono'],
  write: false,
  logLevel: 'error',
});
const { INSPECTOR_FILES } = await import(
  `data:text/javascript;base64,${Buffer.from(files.outputFiles[0].contents).toString('base64')}`
);
for (const [name, text] of Object.entries(INSPECTOR_FILES)) update(`.assets/ui/${name}`, Buffer.from(text));

// The OpenAPI document the Worker's app would generate: its route table, without the GET /metrics
// of Node's and Deno's (functions/worker.ts passes no `metrics`), made by the function that makes
// Node's. The app's modules are bundled (their packages left to node_modules) into a file here,
// where those packages resolve, and imported. npm install leaves it out (`--without-openapi`):
// DEPLOY.md's Dockerfile installs before it copies the app's sources, the Node and Deno servers
// generate their own, and wrangler's build (wrangler.toml [build]) runs this script in full before
// it bundles or serves the Worker.
if (!process.argv.includes('--without-openapi')) {
  mkdirSync('node_modules/.cache', { recursive: true });
  const scratch = mkdtempSync('node_modules/.cache/assets-');
  try {
    const outfile = join(scratch, 'openapi.mjs');
    await build({
      stdin: {
        contents: [
          "import { createApp } from './functions/app.ts';",
          "import { generateOpenApiDocument } from './functions/openapi-document.ts';",
          "const store = () => { throw new Error('the OpenAPI document reads no store'); };",
          'export const document = generateOpenApiDocument(createApp({ store }));',
          "export { OPENAPI_ASSET_PATH } from './functions/openapi-asset.ts';",
        ].join('\n'),
        resolveDir: '.',
        loader: 'ts',
      },
      bundle: true,
      platform: 'node',
      format: 'esm',
      packages: 'external',
      outfile,
      logLevel: 'error',
    });
    const { document, OPENAPI_ASSET_PATH } = await import(pathToFileURL(outfile).href);
    update(`.assets${OPENAPI_ASSET_PATH}`, Buffer.from(JSON.stringify(document)));
  } finally {
    rmSync(scratch, { recursive: true, force: true });
  }
}
