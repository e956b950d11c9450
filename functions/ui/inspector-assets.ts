import type { Context } from 'hono';
import type { InspectorFile } from './inspector-files.ts';

/** The files read so far: a deployment's static assets do not change under its isolates. */
const read = new Map<InspectorFile, string>();

/**
 * The Worker's `inspectorFile` (wrangler.toml [alias] puts this module in place of
 * functions/ui/inspector-files.ts): the file as `npm run assets` wrote it to .assets/ui/, read
 * through the ASSETS binding (wrangler.toml [assets]). Its path is in `run_worker_first`, so the
 * platform never serves it itself: GET /ui/app.css, say, is answered by the worker with the
 * inspector's headers, and GET /ui/page.html is a 404, as on Node and Deno. Throws (a 500) when
 * the deployment has no such asset.
 */
export async function inspectorFile(c: Context, name: InspectorFile): Promise<string> {
  const known = read.get(name);
  if (known !== undefined) return known;
  const assets = (c.env as { ASSETS?: Fetcher } | undefined)?.ASSETS;
  const response = await assets?.fetch(new URL(`/ui/${name}`, c.req.url));
  if (!response?.ok)
    throw new Error(
      `.assets/ui/${name} is not in the Worker's static assets (ASSETS, wrangler.toml [assets]): ` +
        'run `npm run assets` before deploying',
    );
  const text = await response.text();
  read.set(name, text);
  return text;
}
