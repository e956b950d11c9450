import type { Context } from 'hono';
import { TailgateError } from '../lib/errors.ts';
import type { ServiceConfig } from '../lib/config.ts';
import { corsAllows } from './cors.ts';

/**
 * Anonymous access (ALLOW_ANONYMOUS) takes every request that reaches the port as the admin, and
 * a page of any site open in the developer's browser reaches it too (docs/SECURITY.md):
 *
 * - by a request of its own: a POST without a body needs no preflight (a new conversation, a
 *   compaction, a revocation). A request that may change something (any method but GET, HEAD and
 *   OPTIONS) whose `Origin` is neither the service's own host nor one of CORS_ORIGINS is refused,
 *   and one without an `Origin` whose `Sec-Fetch-Site` is neither `same-origin` nor `none`.
 * - through a public name it points at this machine (DNS rebinding): to the browser the service
 *   is then that page's own origin, so it reads every answer. A request to a host name that
 *   public DNS can hand out is refused; an IP address, `localhost`, a name of one label and
 *   the names of the special-use suffixes no public DNS serves (`.localhost`, `.test`, `.local`,
 *   `.internal`, `.home.arpa`) are taken.
 *
 * Both are 403 `forbidden`; the inspector's page and the docs, which hold no data, are served
 * before this check.
 */
export function refuseBrowserReach(c: Context, config: ServiceConfig): void {
  const url = new URL(c.req.url);
  if (isPublicName(url.hostname)) {
    throw new TailgateError(
      'forbidden',
      `anonymous access (ALLOW_ANONYMOUS) takes requests to an IP address, localhost or a local name, not to ` +
        `${url.hostname}: a web page could point that name at this machine; set API_TOKEN and send it`,
      { host: url.hostname },
    );
  }
  if (READING_METHODS.has(c.req.method)) return;
  const origin = c.req.header('origin');
  // Without an Origin (a client that is no browser sends none), a browser's Sec-Fetch-Site still
  // tells a page of another site (`same-site` too: another port of this host is one).
  const site = c.req.header('sec-fetch-site')?.trim().toLowerCase();
  if (origin === undefined && (site === undefined || site === 'same-origin' || site === 'none')) return;
  if (origin !== undefined && corsAllows(config.corsOrigins, origin)) return;
  if (origin !== undefined && URL.canParse(origin) && new URL(origin).host === url.host) return;
  throw new TailgateError(
    'forbidden',
    'anonymous access (ALLOW_ANONYMOUS) takes no request that changes something from a page of ' +
      (origin === undefined
        ? `another site (no Origin, Sec-Fetch-Site: ${site}): set API_TOKEN and send it`
        : `${origin}: add that origin to CORS_ORIGINS, or set API_TOKEN and send it`),
    { origin: origin ?? null },
  );
}

/** Methods a page of any site may send without a preflight and that change nothing here. */
const READING_METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'OPTIONS']);

/** Suffixes no public DNS serves (RFC 6761, RFC 6762, RFC 8375, ICANN's `.internal`). */
const LOCAL_SUFFIX = /(^|\.)(localhost|test|local|internal|home\.arpa)$/;

/** Whether `hostname` (as the URL parser writes it) is a name that public DNS may resolve. */
function isPublicName(hostname: string): boolean {
  const host = hostname.toLowerCase().replace(/\.+$/, '');
  if (host.startsWith('[') || /^\d+\.\d+\.\d+\.\d+$/.test(host)) return false;
  return host.includes('.') && !LOCAL_SUFFIX.test(host);
}
