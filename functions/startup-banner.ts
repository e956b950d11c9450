import type { ServiceConfig } from '../lib/config.ts';

/**
 * The few lines a server prints when it starts: `npm run start:node` and `start:deno`
 * (functions/node.ts, functions/deno.ts), and `npm start` (scripts/start.ts, around wrangler
 * dev). `store` says where sessions are kept.
 */
export function startupBanner(runtime: string, url: string, config: ServiceConfig, store: string): string {
  const open = config.publicDocs ? '/healthz, /ui, /docs and /openapi.json' : '/healthz and /ui';
  const anonymous = config.allowAnonymous && config.apiToken === undefined;
  const access = anonymous
    ? isLoopback(url)
      ? 'anonymous (no token needed; set API_TOKEN to require one)'
      : 'anonymous on a non-loopback address: whoever reaches this port is admin (set API_TOKEN to require a token)'
    : config.apiToken !== undefined
      ? 'bearer token (API_TOKEN)'
      : config.tokenSigningKey !== undefined
        ? 'scoped tokens only (TOKEN_SIGNING_KEY)'
        : `none: set API_TOKEN (every request but ${open} is 503 not_configured)`;
  return [
    `tailgate (${runtime}) on ${url}`,
    `  store:  ${store}`,
    `  model:  ${config.defaultModel}`,
    `  access: ${access}`,
    `  docs:   ${url}/docs${config.publicDocs ? '' : ' (with a token; PUBLIC_DOCS=false)'}`,
  ].join('\n');
}

/** Whether the server's `url` names a loopback host (127.0.0.0/8, ::1, localhost), reached from this machine only. */
function isLoopback(url: string): boolean {
  const host = new URL(url).hostname;
  return host === 'localhost' || host === '[::1]' || /^127\.\d+\.\d+\.\d+$/.test(host);
}
