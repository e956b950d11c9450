import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { INSPECTOR_HOOK_MS, type InspectorNode, startInspectorNode } from '../support/inspector-node.ts';

/**
 * The /docs page (functions/docs-page.ts) in Debian's Chromium against the Node server
 * (functions/node.ts): under its own Content-Security-Policy it renders the API reference, asks
 * nothing of another origin and breaks none of its rules.
 */
let node: InspectorNode;

beforeAll(async () => {
  node = await startInspectorNode({ API_TOKEN: 'docs-page-token' });
}, INSPECTOR_HOOK_MS);

afterAll(() => node?.close());

/** The directives of a Content-Security-Policy header, by name. */
function directives(policy: string): Map<string, string[]> {
  return new Map(
    policy
      .split(';')
      .map((part) => part.trim().split(/\s+/))
      .filter((words) => words[0])
      .map(([name, ...values]) => [name!.toLowerCase(), values]),
  );
}

describe('the /docs page', () => {
  it('sends a Content-Security-Policy that allows nothing but the service itself', async () => {
    const response = await fetch(`${node.origin}/docs`);
    expect(response.status).toBe(200);
    const policy = directives(response.headers.get('content-security-policy') ?? '');
    expect(policy.get('default-src')).toEqual(["'none'"]);
    expect(policy.get('frame-ancestors')).toEqual(["'none'"]);
    expect(policy.get('base-uri')).toEqual(["'none'"]);
    expect(policy.get('form-action')).toEqual(["'none'"]);
    // Nothing from another origin; no script but the service's own and those naming the nonce.
    for (const [name, values] of policy) {
      const allowed = name === 'style-src' ? ["'self'", "'unsafe-inline'"] : ["'self'", "'none'", 'data:', 'blob:'];
      for (const value of values) {
        if (!(name === 'script-src' && /^'nonce-[A-Za-z0-9+/=]{22,}'$/.test(value)))
          expect(allowed, name).toContain(value);
      }
    }
    expect(policy.get('script-src')).toContain("'self'");
    expect(policy.get('connect-src')).toEqual(["'self'"]);
    // Each response a nonce of its own, the one on the page's inline scripts.
    const nonce = /'nonce-([^']+)'/.exec(policy.get('script-src')!.join(' '))?.[1];
    expect(nonce).toBeDefined();
    const html = await response.text();
    expect(html).toContain(`<script type="text/javascript" nonce="${nonce}">`);
    const again = (await fetch(`${node.origin}/docs`)).headers.get('content-security-policy') ?? '';
    expect(again).not.toContain(`'nonce-${nonce}'`);
    // Kept by no cache, browser's or shared: a page served again from one would serve its nonce again.
    expect(response.headers.get('cache-control')).toBe('no-store');
  });

  it('renders the API reference in Chromium under its policy, breaking none of it', { timeout: 60_000 }, async () => {
    const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())));
    page.on('pageerror', (error) => errors.push(error.message));
    const requested: string[] = [];
    page.on('request', (request) => requested.push(request.url()));
    await context.addInitScript(() => {
      (window as any).violations = [];
      document.addEventListener('securitypolicyviolation', (event) =>
        (window as any).violations.push(`${event.violatedDirective} ${event.blockedURI}`),
      );
    });
    const response = await page.goto(`${node.origin}/docs`);
    expect(response?.headers()['content-security-policy']).toMatch(/default-src 'none'/);
    // Scalar's reference, drawn from the embedded document: an operation of the API.
    await page.getByText('Health check (no auth)').first().waitFor({ timeout: 30_000 });
    await page.getByText('tailgate').first().waitFor();
    expect(await page.evaluate(() => (window as any).violations)).toEqual([]);
    expect(errors).toEqual([]);
    for (const url of requested) expect(url.startsWith(`${node.origin}/`) || /^(data|blob):/.test(url), url).toBe(true);
    await context.close();
  });
});
