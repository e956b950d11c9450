import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { apiCaller, INSPECTOR_HOOK_MS, type InspectorNode, startInspectorNode } from '../support/inspector-node.ts';
import { dataUrl, pdfBytes, pngBytes } from '../support/media-fixtures.ts';

/**
 * Text an agent, a model or a notice poster wrote, shown by the inspector in Debian's Chromium
 * against the Node server: markup in it is shown as text, runs nothing and adds no element, and
 * the page's Content-Security-Policy reports no violation (an inline handler that made it into
 * the DOM would be one).
 */
const TOKEN = 'ui-xss-token';
const MARK = 'xss-mark';
const PAYLOADS = [
  `<img src=x onerror="window.__pwned=1" class="${MARK}">`,
  `</script><script class="${MARK}">window.__pwned=2</script>`,
  `"><svg onload="window.__pwned=3" class="${MARK}">`,
  `javascript:window.__pwned=4`,
  `<a href="javascript:window.__pwned=5" class="${MARK}">x</a>`,
];
const TEXT = PAYLOADS.join(' ');
let node: InspectorNode;

beforeAll(async () => {
  node = await startInspectorNode({ API_TOKEN: TOKEN });
}, INSPECTOR_HOOK_MS);

afterAll(async () => {
  await node?.close();
});

const call = apiCaller(() => node.origin, TOKEN);

/** The inspector at `hash` in a tab of its own, counting what a payload could have made run. */
async function open(hash: string): Promise<Page> {
  const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
  await context.addInitScript((value) => {
    sessionStorage.setItem('tailgate.token', value);
    (window as any).__violations = [];
    document.addEventListener('securitypolicyviolation', (event) =>
      (window as any).__violations.push(`${event.violatedDirective} ${event.sourceFile}:${event.lineNumber}`),
    );
  }, TOKEN);
  const page = await context.newPage();
  page.on('dialog', (dialog) => void dialog.dismiss());
  await page.goto(`${node.origin}/ui${hash}`);
  return page;
}

async function nothingRan(page: Page): Promise<void> {
  expect(await page.evaluate(() => (window as any).__pwned)).toBeUndefined();
  expect(await page.evaluate(() => (window as any).__violations)).toEqual([]);
  expect(await page.locator(`.${MARK}`).count()).toBe(0);
  expect(await page.locator('[onerror], [onload], a[href^="javascript:" i]').count()).toBe(0);
}

describe('the inspector shows stored markup as text', () => {
  it('from instructions, metadata, items, tool calls, file names and notices', { timeout: 90_000 }, async () => {
    const id = 'xss-session';
    await call('POST', '/v1/sessions', {
      id,
      instructions: TEXT,
      metadata: { [PAYLOADS[0]!]: TEXT },
      tools: [{ type: 'function', name: 'read', description: TEXT, parameters: { type: 'object' } }],
    });
    await call('POST', `/v1/sessions/${id}/inbox`, { name: 'note.md', content: TEXT });
    await call('POST', `/v1/sessions/${id}/turns`, {
      input: [
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: TEXT },
            { type: 'input_image', image_url: dataUrl('image/png', pngBytes(2, 2)) },
            { type: 'input_file', filename: `${PAYLOADS[0]}.pdf`, file_data: dataUrl('application/pdf', pdfBytes()) },
            { type: 'input_image', image_url: `https://example.com/${encodeURIComponent(PAYLOADS[1]!)}` },
          ],
        },
      ],
    });
    await call('POST', `/v1/sessions/${id}/items`, {
      items: [
        { type: 'function_call', call_id: 'call_x', name: 'read', arguments: JSON.stringify({ q: TEXT }) },
        { type: 'function_call_output', call_id: 'call_x', output: TEXT },
        { type: 'message', role: 'assistant', content: TEXT },
      ],
    });
    await call('POST', `/v1/sessions/${id}/turns`, { input: TEXT });

    const list = await open('');
    await expect.poll(() => list.locator(`#session-table tr[data-id="${id}"]`).count()).toBe(1);
    await nothingRan(list);
    await list.context().close();

    const page = await open(`#/s/${id}`);
    for (const turn of [1, 2]) await page.locator(`#timeline details.turn[data-turn="${turn}"] summary`).click();
    await expect.poll(() => page.getByText(PAYLOADS[1]!, { exact: false }).count()).toBeGreaterThan(3);
    // The stored image shows (its blob fetched), the file by its name, the https image as a link.
    await expect.poll(() => page.locator('img.thumb[src^="blob:"]').count()).toBeGreaterThan(0);
    expect(await page.getByText(`file ${PAYLOADS[0]}.pdf`, { exact: false }).count()).toBeGreaterThan(0);
    expect(await page.locator('a.image-link[href^="https://example.com/"]').count()).toBeGreaterThan(0);
    await nothingRan(page);
    await page.context().close();
  });

  it('a token form the browser sent itself (no script to catch it) is refused: the token reaches no URL', async () => {
    const page = await open('');
    await expect.poll(() => page.locator('#session-table').count()).toBe(1);
    await page.evaluate(() => {
      const input = document.getElementById('token-input') as HTMLInputElement;
      input.value = 'token-in-a-url';
      (document.getElementById('token-form') as HTMLFormElement).submit();
    });
    await expect
      .poll(() => page.evaluate(() => (window as any).__violations))
      .toEqual([expect.stringMatching(/^form-action /)]);
    expect(page.url()).not.toContain('token-in-a-url');
    await page.context().close();
  });
});
