// Fills .assets/, the files the Worker serves as static assets (wrangler.toml `[assets]`; Node
// and Deno read them through functions/local-server.ts): a copy of the /docs page's script, and
// the /ui inspector's script bundled from its modules (functions/ui/client/, entry main.ts); and
// the inspector's page, stylesheet and icon (functions/ui/inspector-files.ts), which the Worker
// reads through its ASSETS binding (Node and Deno from the modules themselves). Run
// by npm install, before start, start:node, start:deno and build, and by the node tests' global setup
// (test/support/global-setup.ts), so no test loads a stale bundle. A file already there with
// the same bytes is left alone: `wrangler dev` watches .assets/ and restarts its worker on any
// write, so a second `npm start` would restart the first one's worker mid-request.
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
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
