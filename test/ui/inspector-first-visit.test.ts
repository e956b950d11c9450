import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, INSPECTOR_HOOK_MS, type InspectorNode, startInspectorNode } from '../support/inspector-node.ts';
import { startedAll } from '../support/server-process.ts';

/**
 * The inspector's first visit, in a tab holding no token, in Debian's Chromium against the Node
 * server (functions/node.ts, files in a temporary DATA_DIR): where the API needs a token the page
 * asks for it before calling the API (Chromium logs every 4xx fetch as a console error); where it
 * lets requests in without one (ALLOW_ANONYMOUS), the page lists sessions at once.
 */
const TOKEN = 'ui-first-visit-token';
let guarded: InspectorNode;
let open: InspectorNode;

beforeAll(async () => {
  [guarded, open] = await startedAll(
    [startInspectorNode({ API_TOKEN: TOKEN }), startInspectorNode({ ALLOW_ANONYMOUS: 'true' })],
    (node) => node.close(),
  );
}, INSPECTOR_HOOK_MS);

afterAll(async () => {
  await guarded?.close();
  await open?.close();
});

/** /ui of `node` in a new tab (no token kept), with what it logs as errors and the API paths it asks for. */
async function firstVisit(node: InspectorNode) {
  const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
  const page: Page = await context.newPage();
  const errors: string[] = [];
  page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())));
  page.on('pageerror', (error) => errors.push(error.message));
  const asked: string[] = [];
  page.on('request', (request) => {
    const path = new URL(request.url()).pathname;
    if (path.startsWith('/v1/')) asked.push(path);
  });
  await page.goto(`${node.origin}/ui`);
  return { page, errors, asked };
}

describe("the inspector's first visit", () => {
  it('where the API needs a token, asks for it without a refused request, then lists sessions', {
    timeout: 60_000,
  }, async () => {
    await apiCaller(() => guarded.origin, TOKEN)('POST', '/v1/sessions', { id: 'first-visit' });
    const { page, errors, asked } = await firstVisit(guarded);
    await page.getByLabel('Bearer token').waitFor();
    expect(await page.locator('#token-error').isHidden()).toBe(true);
    expect(await page.locator('#list-view').isHidden()).toBe(true);
    expect(asked).toEqual([]);
    await page.getByLabel('Bearer token').fill(TOKEN);
    await page.getByRole('button', { name: 'Use token' }).click();
    await page.locator('tr[data-id="first-visit"]').waitFor();
    expect(await page.locator('#token-view').isHidden()).toBe(true);
    expect(errors).toEqual([]);
    // Forgetting the token asks for one again, as on a first visit.
    await page.getByRole('button', { name: 'Forget token' }).click();
    await page.getByLabel('Bearer token').waitFor();
    expect(await page.locator('#token-error').isHidden()).toBe(true);
    expect(errors).toEqual([]);
    await page.context().close();
  });

  it('where the API lets requests in without a token, lists sessions at once', { timeout: 60_000 }, async () => {
    await apiCaller(() => open.origin, 'any')('POST', '/v1/sessions', { id: 'anonymous-visit' });
    const { page, errors, asked } = await firstVisit(open);
    await page.locator('tr[data-id="anonymous-visit"]').waitFor();
    expect(await page.locator('#token-view').isHidden()).toBe(true);
    expect(asked).toContain('/v1/sessions');
    expect(errors).toEqual([]);
    await page.context().close();
  });
});
