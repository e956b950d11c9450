import type { Context } from 'hono';
import { INSPECTOR_FAVICON, INSPECTOR_PAGE } from './page.ts';
import { INSPECTOR_CSS } from './styles.ts';

/**
 * The inspector's page (before functions/ui/routes.ts marks whether the API needs a token), its
 * stylesheet and its icon, by their file under .assets/ui/, where `npm run assets`
 * (scripts/assets.mjs) writes them for the Worker.
 */
export const INSPECTOR_FILES = {
  'page.html': INSPECTOR_PAGE,
  'app.css': INSPECTOR_CSS,
  'favicon.svg': INSPECTOR_FAVICON,
} as const;

export type InspectorFile = keyof typeof INSPECTOR_FILES;

/**
 * One of the inspector's files, on Node and Deno from these modules. The Worker reads them from
 * its static assets instead (functions/ui/inspector-assets.ts, wrangler.toml [alias]), so that its
 * bundle does not carry them.
 */
export function inspectorFile(_c: Context, name: InspectorFile): Promise<string> {
  return Promise.resolve(INSPECTOR_FILES[name]);
}
