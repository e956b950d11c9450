import type { ServiceConfig } from '../lib/config.ts';

/**
 * The few lines a server prints when it starts: `npm run start:node` and `start:deno`
 * (functions/node.ts, functions/deno.ts), and `npm start` (scripts/start.ts, around wrangler
 * dev). `store` says where sessions are kept.
 */
export function startupBanner(runtime: string, url: string, config: ServiceConfig, store: string): string {
  const anonymous = config.allowAnonymous && config.apiToken === undefined;
  const access = anonymous
    ? 'anonymous (no token needed; set API_TOKEN to require one)'
    : config.apiToken !== undefined
      ? 'bearer token (API_TOKEN)'
      : config.tokenSigningKey !== undefined
        ? 'scoped tokens only (TOKEN_SIGNING_KEY)'
        : 'none: set API_TOKEN (every request is 503 not_configured)';
  return [
    `tailgate (${runtime}) on ${url}`,
    `  store:  ${store}`,
    `  model:  ${config.defaultModel}`,
    `  access: ${access}`,
    `  docs:   ${url}/docs${config.publicDocs ? '' : ' (with a token; PUBLIC_DOCS=false)'}`,
  ].join('\n');
}
