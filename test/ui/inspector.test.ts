import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type FakeProvider, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import { apiCaller, axeViolations, chunk, finish } from '../support/inspector-node.ts';
import { dataUrl, pdfBytes } from '../support/media-fixtures.ts';
import { SLOW_SERVER_START_MS, startHookTimeout, startServer, type RunningServer } from '../support/server-process.ts';

/**
 * The /ui inspector in a real browser (Debian's Chromium through playwright-core) against
 * `npm start` (wrangler dev: the worker in workerd with a local R2 bucket), with an API
 * token set so the page has to ask for it. The tests are one scenario in one tab, in order:
 * each starts where the previous one left the page.
 */
const TOKEN = 'ui-test-token';
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

let server: RunningServer;
let provider: FakeProvider;
let state: string;
let browser: Browser;
let context: BrowserContext;
let page: Page;
const consoleErrors: string[] = [];
const sessionId = `ui-${Date.now().toString(36)}`;
// Past three pages of the timeline (30 turns each) and enough tool calls for the epoch
// strategy to have compacted and dropped outputs by the newest turn.
const TURNS = 100;

const call = apiCaller(() => server.origin, TOKEN);

/** Lets the model of the turn that asks to `finish when told` end its answer. */
let release: () => void = () => undefined;

/** TURNS turns: half of them tool calls, each answered with an output long enough to be compacted later. */
async function seed(): Promise<void> {
  await call('POST', '/v1/sessions', {
    id: sessionId,
    instructions: 'Read everything.',
    tools: [{ type: 'function', name: 'read', parameters: { type: 'object', properties: { n: { type: 'number' } } } }],
    strategies: ['shorten_tools_epoch', 'inbox'],
    strategy_config: {
      epoch_tool_call_threshold: 8,
      epoch_full_tool_calls: 3,
      epoch_compacted_tool_calls: 6,
      epoch_size: 4,
    },
    metadata: { purpose: 'inspector test' },
  });
  for (let index = 1; index <= TURNS / 2; index++) {
    const asked = await call('POST', `/v1/sessions/${sessionId}/turns`, { input: `call read {"n":${index}}` });
    await call('POST', `/v1/sessions/${sessionId}/turns`, {
      input: [
        {
          type: 'function_call_output',
          call_id: asked.output[0].call_id,
          output: `page ${index}: ${'lorem ipsum '.repeat(60)}`,
        },
      ],
    });
  }
}

/**
 * A new session `id` on the fake provider whose background turn 1 takes `input`, opened in the
 * page once the turn was queued; answers the turn's live box once the model's first text shows
 * there (the provider holds its stream open, or pauses it).
 */
async function followedLive(id: string, input: string, fields: object = {}) {
  await call('POST', '/v1/sessions', { id, model: 'openai-compatible:fake', ...fields });
  expect((await call('POST', `/v1/sessions/${id}/turns`, { input, background: true })).status).toBe('queued');
  await page.goto(`${server.origin}/ui#/s/${id}`);
  const live = page.locator('#timeline li .live');
  await expect.poll(() => live.locator('.live-text').textContent(), { timeout: 60_000 }).toBe('Hello! How can I');
  return live;
}

describe('the inspector at /ui in Chromium', () => {
  beforeAll(
    async () => {
      state = await mkdtemp(join(tmpdir(), 'tailgate-ui-'));
      // The model of the live turn: two pieces of text, then it holds the stream open until cancelled.
      // A turn that asks to `finish when told` ends its answer once the test releases it.
      provider = await startFakeProvider((request) =>
        JSON.stringify(request.body).includes('finish when told')
          ? {
              sse: chunk('Hello') + chunk('! How can I') + finish(),
              pause: { after: 2, until: new Promise<void>((resolve) => (release = resolve)) },
            }
          : { sse: chunk('Hello') + chunk('! How can I'), hang: true },
      );
      server = await startServer(
        'npm',
        [
          'start',
          '--',
          '--port',
          '0',
          '--ip',
          '127.0.0.1',
          '--var',
          `API_TOKEN:${TOKEN}`,
          '--var',
          // Echo priced, so the cost chart has something to draw.
          `MODEL_PRICES:${JSON.stringify({ echo: { input: 1000, output: 2000 } })}`,
          '--var',
          `OPENAI_COMPATIBLE_BASE_URL:${provider.baseURL}`,
          '--persist-to',
          state,
        ],
        {
          env: { WRANGLER_SEND_METRICS: 'false', CI: '1' },
          cwd: process.cwd(),
          timeoutMs: SLOW_SERVER_START_MS,
        },
      );
      await seed();
      browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
      // The page's CSP allows only its own scripts; the test injects axe-core.
      context = await browser.newContext({ bypassCSP: true, viewport: { width: 1400, height: 1000 } });
      page = await context.newPage();
      page.on('console', (message) => {
        if (message.type() === 'error') consoleErrors.push(message.text());
      });
      page.on('pageerror', (error) => consoleErrors.push(error.message));
      // Seeding and Chromium's launch after the server's start.
    },
    startHookTimeout(SLOW_SERVER_START_MS, 135_000),
  );

  afterAll(async () => {
    await browser?.close();
    await server?.stop();
    await provider?.close();
    if (state) await rm(state, { recursive: true, force: true });
  });

  it('asks for a token before any call, says when one is refused, keeps it in sessionStorage, and lists sessions', {
    timeout: 60_000,
  }, async () => {
    await page.goto(`${server.origin}/ui`);
    await page.getByLabel('Bearer token').waitFor();
    expect(await page.locator('#list-view').isHidden()).toBe(true);
    expect(await page.locator('#token-error').isHidden()).toBe(true);
    // Asked before any call to the API (a refused one would be a console error).
    expect(consoleErrors).toEqual([]);
    expect(await axeViolations(page)).toEqual([]);
    await page.getByLabel('Bearer token').fill('not-the-token');
    await page.getByRole('button', { name: 'Use token' }).click();
    await page.getByRole('alert').waitFor();
    expect(await page.getByRole('alert').textContent()).toBe(
      'The API refused this token (401): check it and enter it again.',
    );
    expect(await page.evaluate(() => sessionStorage.getItem('tailgate.token'))).toBeNull();
    expect(await page.locator('#list-view').isHidden()).toBe(true);
    await page.getByLabel('Bearer token').fill(TOKEN);
    await page.getByRole('button', { name: 'Use token' }).click();
    const row = page.locator(`tr[data-id="${sessionId}"]`);
    await row.waitFor();
    expect(await row.locator('td').nth(2).textContent()).toBe(String(TURNS));
    // Last activity: relative, the absolute time in the title.
    const activity = row.locator('td').nth(5).locator('time');
    expect(await activity.textContent()).toMatch(/^(just now|\d+ min ago)$/);
    const datetime = (await activity.getAttribute('datetime'))!;
    expect(await activity.getAttribute('title')).toBe(
      await page.evaluate((iso) => new Date(iso).toLocaleString(), datetime),
    );
    expect(await page.evaluate(() => sessionStorage.getItem('tailgate.token'))).toBe(TOKEN);
    expect(page.url()).not.toContain(TOKEN);
    await page.getByLabel('Search by id').fill('no-such-session');
    expect(await row.isHidden()).toBe(true);
    await page.getByLabel('Search by id').fill(sessionId.slice(0, 6));
    expect(await row.isVisible()).toBe(true);
    expect(await axeViolations(page)).toEqual([]);
  });

  it(`opens a session of ${TURNS} turns a page at a time, with the strip chart`, { timeout: 60_000 }, async () => {
    await page.locator(`a[href="#/s/${sessionId}"]`).click();
    await page.locator('#timeline details.turn').first().waitFor();
    await expect.poll(() => page.locator('#timeline details.turn').count()).toBeGreaterThanOrEqual(30);
    const first = await page.locator('#timeline details.turn').count();
    expect(first).toBeLessThan(TURNS);
    expect(await page.locator('#timeline details.turn').first().getAttribute('data-turn')).toBe(String(TURNS));
    await page.locator('#timeline-more').scrollIntoViewIfNeeded();
    await expect.poll(() => page.locator('#timeline details.turn').count()).toBeGreaterThan(first);
    const loaded = await page.locator('#timeline details.turn').count();
    expect(await page.locator('#strip-chart rect.bar-total').count()).toBe(loaded);
    // Axes: the scale's top and 0, the oldest and newest turn loaded; and a legend.
    expect(await page.locator('#strip-chart .axis-y span').allTextContents()).toEqual([
      expect.stringMatching(/^[\d,]+ chars$/),
      '0',
    ]);
    expect(await page.locator('#strip-chart .axis-x span').allTextContents()).toEqual([
      `turn ${TURNS - loaded + 1}`,
      `turn ${TURNS}`,
    ]);
    expect(await page.locator('#strip-chart .legend li').allTextContents()).toEqual([
      'prompt size',
      'reused from the previous prompt',
    ]);
  });

  it('draws cost and cache-read share per turn, and shows the session totals', { timeout: 60_000 }, async () => {
    const turns = await page.locator('#timeline details.turn').count();
    expect(await page.locator('#cost-chart rect.bar-cost').count()).toBe(turns);
    expect(await page.locator('#cost-chart rect.bar-cache').count()).toBe(turns);
    const newest = await call('GET', `/v1/sessions/${sessionId}/turns/${TURNS}`);
    const cost = `$${newest.usage.cost_usd.toFixed(6)}`;
    expect(await page.locator(`#timeline details.turn[data-turn="${TURNS}"] summary`).textContent()).toContain(cost);
    expect(await page.locator('#cost-chart rect.bar-cost title').last().textContent()).toBe(
      `turn ${TURNS} · ${cost} · 0% cache read`,
    );
    const session = await call('GET', `/v1/sessions/${sessionId}`);
    const counts = await page.locator('#session-counts').textContent();
    expect(counts).toContain(`$${session.usage.cost_usd.toFixed(6)}`);
    // Every token kind of the session's totals, billed: the completed turns', failed turns' estimates, summaries'.
    const { usage } = session;
    expect(counts).toContain(
      `billed (${usage.turns} completed turns, failed turns' estimates, summaries): ` +
        `${usage.input_tokens} input tokens ` +
        `(${usage.cached_input_tokens} cached, ${usage.cache_write_tokens} written to cache), ` +
        `${usage.output_tokens} output (${usage.reasoning_tokens} reasoning)`,
    );
    expect(await page.locator('#cost-chart .axis-y span').allTextContents()).toEqual([
      expect.stringMatching(/^\$\d+\.\d{6} · 100%$/),
      '0',
    ]);
    expect(await page.locator('#cost-chart .legend li').allTextContents()).toEqual([
      expect.stringMatching(/^cost \(top: the costliest turn, \$\d+\.\d{6}\)$/),
      'cache-read share of the input (top: 100%)',
    ]);
  });

  it('expands a turn: input, output, and a compacted item with its hash stamp and its stored original', {
    timeout: 60_000,
  }, async () => {
    const turn = page.locator(`#timeline details.turn[data-turn="${TURNS}"]`);
    await turn.locator('summary').click();
    await turn.locator('.turn-input li').first().waitFor();
    expect(await turn.locator('.turn-output li').first().textContent()).toContain('echo:');
    await turn.locator('.synthetic-context_notice').waitFor();
    const compacted = turn.locator('.turn-seen li.treatment-compacted').first();
    // Older items load as the end of the list scrolls into view: scrolled to again once a page came.
    const seen = turn.locator('.turn-seen li.item');
    const end = turn.locator('.turn-seen > p.muted').last();
    while ((await compacted.count()) === 0) {
      const shown = await seen.count();
      expect(await end.textContent()).not.toBe('Start of the history.');
      await end.scrollIntoViewIfNeeded();
      await expect.poll(async () => (await compacted.count()) > 0 || (await seen.count()) > shown).toBe(true);
    }
    expect(await compacted.locator('.stamp').textContent()).toMatch(/^stamp md5 [0-9a-f]{5}$/);
    expect(await compacted.locator('pre').textContent()).toMatch(/\[compacted: \d+ chars, md5 [0-9a-f]{5}\./);
    await compacted.getByRole('button', { name: 'Show stored original' }).click();
    expect(await compacted.locator('pre').textContent()).toMatch(/^output call_\w+: page \d+: (lorem ipsum )+$/);
    expect(await turn.locator('.turn-seen li.treatment-dropped').count()).toBeGreaterThan(0);
    // The README's docs/inspector.png: the session view from the top, this turn expanded.
    // Rewritten only with UPDATE_SCREENSHOTS=1, so a test run leaves the tree unchanged.
    await page.evaluate(() => window.scrollTo(0, 0));
    const shot = await page.screenshot({
      fullPage: false,
      ...(process.env.UPDATE_SCREENSHOTS === '1' ? { path: 'docs/inspector.png' } : {}),
    });
    expect(shot.length).toBeGreaterThan(10_000);
    expect(await axeViolations(page)).toEqual([]);
  });

  it('posts a notice and sees it delivered by a turn taken from the chat box, which keeps expanded turns', {
    timeout: 60_000,
  }, async () => {
    // Turn TURNS is expanded (the test before), its compacted item showing the stored original.
    const expanded = page.locator(`#timeline details.turn[data-turn="${TURNS}"]`);
    expect(await expanded.getAttribute('open')).toBe('');
    await expanded.evaluate((element) => ((element as any).shownBeforeTheTurn = true));
    await page.locator('#chat-section').evaluate((element) => element.scrollIntoView());
    const scrolled = await page.evaluate(() => window.scrollY);
    expect(scrolled).toBeGreaterThan(0);
    const itemsBefore = Number(await page.locator('dd[data-count="Items in prompt"]').textContent());
    await page.getByLabel('Name', { exact: true }).fill('0001-budget.md');
    await page.getByLabel('Notice', { exact: true }).fill('Budget left: 2 USD');
    await page.getByRole('button', { name: 'Post notice' }).click();
    await expect.poll(() => page.locator('#inbox-pending').textContent()).toContain('0001-budget.md');
    await page.getByLabel('Input', { exact: true }).fill('go on');
    await page.getByRole('button', { name: 'Send (streamed)' }).click();
    await expect.poll(() => page.locator('#chat-output').textContent()).toContain(`[turn ${TURNS + 1} completed]`);
    expect(await page.locator('#chat-output').textContent()).toContain('echo: Budget left: 2 USD');
    await expect
      .poll(() => page.locator('#inbox-delivered').textContent())
      .toContain(`0001-budget.md → turn ${TURNS + 1}`);
    // The pending list is read beside the delivered one, and may show after it.
    await expect.poll(() => page.locator('#inbox-pending li').count()).toBe(0);
    const added = page.locator(`#timeline details.turn[data-turn="${TURNS + 1}"]`);
    await added.waitFor();
    // The view was not drawn again: the expanded turn is the same element, still open, still
    // showing the stored original; the new turn shows on top, in view, and the page did not move.
    expect(await expanded.evaluate((element) => (element as any).shownBeforeTheTurn)).toBe(true);
    expect(await expanded.getAttribute('open')).toBe('');
    expect(await expanded.getByRole('button', { name: 'Show what the model got' }).count()).toBe(1);
    expect(await page.locator('#timeline details.turn').first().getAttribute('data-turn')).toBe(String(TURNS + 1));
    const box = (await added.boundingBox())!;
    expect(box.y).toBeGreaterThanOrEqual(0);
    expect(box.y + box.height).toBeLessThanOrEqual(page.viewportSize()!.height);
    expect(await page.evaluate(() => window.scrollY)).toBe(scrolled);
    // The prompt preview counts the new turn's items.
    await expect
      .poll(async () => Number(await page.locator('dd[data-count="Items in prompt"]').textContent()))
      .toBeGreaterThan(itemsBefore);
  });

  it('the abort button stops the next turn before the model is called', { timeout: 60_000 }, async () => {
    await page.getByRole('button', { name: 'Abort next turn' }).click();
    await expect.poll(() => page.locator('#inbox-pending').textContent()).toContain('abort');
    await page.getByLabel('Input', { exact: true }).fill('one more');
    await page.getByRole('button', { name: 'Send (streamed)' }).click();
    await expect.poll(() => page.locator('#chat-output').textContent()).toContain('Refused: aborted');
    const aborted = page.locator(`#timeline details.turn[data-turn="${TURNS + 2}"]`);
    await aborted.waitFor();
    expect(await aborted.getAttribute('class')).toContain('status-aborted');
    expect(await aborted.locator('summary').textContent()).toBe(
      `Turn ${TURNS + 2} · aborted by notice abort: “stopped from the inspector”`,
    );
  });

  it('editing a threshold updates the prompt preview counts, and saving patches the session', {
    timeout: 60_000,
  }, async () => {
    await page.locator('dd[data-count="Kept whole"]').waitFor();
    const kept = Number(await page.locator('dd[data-count="Kept whole"]').textContent());
    await page.getByLabel('epoch_full_tool_calls').fill('40');
    await expect
      .poll(async () => Number(await page.locator('dd[data-count="Kept whole"]').textContent()))
      .toBeGreaterThan(kept);
    await page.getByRole('button', { name: 'Save (PATCH)' }).click();
    await expect.poll(() => page.locator('#config-status').textContent()).toBe('Saved.');
    expect((await call('GET', `/v1/sessions/${sessionId}`)).strategy_config.epoch_full_tool_calls).toBe(40);
    expect(await axeViolations(page)).toEqual([]);
  });

  it('collapses an output longer than 12 lines behind a button, and shows relative times with absolute titles', {
    timeout: 60_000,
  }, async () => {
    const lines = Array.from({ length: 40 }, (_, index) => `line ${index + 1}`);
    await call('POST', `/v1/sessions/${sessionId}/turns`, { input: lines.join('\n') });
    await page.reload();
    const turn = page.locator(`#timeline details.turn[data-turn="${TURNS + 3}"]`);
    await turn.locator('summary').click();
    const output = turn.locator('.turn-output li').first();
    await output.waitFor();
    expect((await output.locator('pre').textContent())!.split('\n')).toEqual([
      'assistant: echo: line 1',
      ...lines.slice(1, 12),
      '…',
    ]);
    const toggle = output.getByRole('button', { name: 'Show all 40 lines' });
    expect(await toggle.getAttribute('aria-expanded')).toBe('false');
    await toggle.click();
    expect(await output.locator('pre').textContent()).toBe(`assistant: echo: ${lines.join('\n')}`);
    expect(await output.getByRole('button', { name: 'Show the first 12 lines' }).getAttribute('aria-expanded')).toBe(
      'true',
    );
    // The input is as long; among what the model saw, it is the only item collapsed (the others are one line).
    expect(await turn.locator('.turn-input li button').textContent()).toBe('Show all 40 lines');
    await expect.poll(() => turn.locator('.turn-seen li.item').count()).toBeGreaterThan(10);
    expect(await turn.locator('.turn-seen li.item .toggle-collapse').count()).toBe(1);
    const started = turn.locator('.turn-times time');
    expect(await started.textContent()).toMatch(/^(just now|\d+ min ago)$/);
    const datetime = (await started.getAttribute('datetime'))!;
    expect(await started.getAttribute('title')).toBe(
      await page.evaluate((iso) => new Date(iso).toLocaleString(), datetime),
    );
    expect(await turn.locator('.turn-times').textContent()).toMatch(/ · took \d/);
    expect(await axeViolations(page)).toEqual([]);
  });

  const imageSession = `${sessionId}-img`;

  it('shows stored images as thumbnails, https images as links, files by name, type and size; marks pruned images', {
    timeout: 90_000,
  }, async () => {
    // A real PNG (40x30), drawn by the browser.
    const png = await page.evaluate(() => {
      const canvas = document.createElement('canvas');
      canvas.width = 40;
      canvas.height = 30;
      const context = canvas.getContext('2d')!;
      context.fillStyle = '#c00000';
      context.fillRect(0, 0, 40, 30);
      return canvas.toDataURL('image/png');
    });
    await call('POST', '/v1/sessions', {
      id: imageSession,
      tools: [{ type: 'function', name: 'read', parameters: { type: 'object', properties: {} } }],
      strategies: ['shorten_tools_epoch'],
      strategy_config: { epoch_tool_call_threshold: 8, epoch_full_tool_calls: 3, epoch_compacted_tool_calls: 6 },
    });
    // Twelve calls answered with a screenshot and a long text: the strategy compacts the older
    // outputs, and the compacted text describes the image ("[image/png 40x30, ...]").
    const items = Array.from({ length: 12 }, (_, index) => [
      { type: 'function_call', call_id: `call_${index}`, name: 'read', arguments: '{}' },
      {
        type: 'function_call_output',
        call_id: `call_${index}`,
        output: [
          { type: 'input_image', image_url: png },
          { type: 'input_text', text: `page ${index}: ${'lorem ipsum '.repeat(60)}` },
        ],
      },
    ]).flat();
    await call('POST', `/v1/sessions/${imageSession}/items`, { items });
    const pdf = pdfBytes();
    await call('POST', `/v1/sessions/${imageSession}/turns`, {
      input: [
        {
          type: 'message',
          role: 'user',
          content: [
            { type: 'input_text', text: 'look' },
            { type: 'input_image', image_url: png },
            { type: 'input_image', image_url: 'https://example.com/cat.png' },
            { type: 'input_file', filename: 'report.pdf', file_data: dataUrl('application/pdf', pdf) },
          ],
        },
      ],
    });
    await page.goto(`${server.origin}/ui#/s/${imageSession}`);
    const turn = page.locator('#timeline details.turn[data-turn="1"]');
    await turn.locator('summary').click();
    const input = turn.locator('.turn-input li').first();
    await input.waitFor();
    expect(await input.locator('pre').textContent()).toBe('user: look');
    const thumb = input.locator('img.thumb');
    expect(await thumb.getAttribute('alt')).toMatch(/^image image\/png 40x30, \d+ B$/);
    // Loaded from the blob route with the token, and decoded.
    await expect
      .poll(() => thumb.evaluate((image) => (image as HTMLImageElement).naturalWidth), { timeout: 15_000 })
      .toBe(40);
    expect(await thumb.getAttribute('src')).toMatch(/^blob:/);
    const link = input.locator('a.image-link');
    expect(await link.getAttribute('href')).toBe('https://example.com/cat.png');
    expect(await input.locator('.file').textContent()).toBe(`file report.pdf · application/pdf · ${pdf.length} B`);
    // What the model saw: older outputs compacted to text describing their image (pruned), the newest whole.
    const pruned = turn.locator('.turn-seen li.image-pruned');
    await pruned.first().waitFor();
    expect(await pruned.first().getAttribute('class')).toContain('treatment-compacted');
    expect(await pruned.first().locator('.pruned-mark').textContent()).toContain('image pruned');
    expect(await pruned.first().locator('pre').textContent()).toContain('[image/png 40x30');
    const whole = turn.locator('.turn-seen li.treatment-whole:not(.image-pruned) img.thumb');
    expect(await whole.count()).toBeGreaterThan(0);
    await expect
      .poll(() => whole.first().evaluate((image) => (image as HTMLImageElement).naturalWidth), { timeout: 15_000 })
      .toBe(40);
    expect(await turn.textContent()).not.toContain('[object Object]');
    expect(await axeViolations(page)).toEqual([]);
    // Under the page's own Content-Security-Policy (this tab bypasses it for axe-core), the thumbnail loads too.
    const strict = await browser.newContext();
    try {
      const strictPage = await strict.newPage();
      await strictPage.addInitScript((token) => sessionStorage.setItem('tailgate.token', token), TOKEN);
      await strictPage.goto(`${server.origin}/ui#/s/${imageSession}`);
      await strictPage.locator('#timeline details.turn[data-turn="1"] summary').click();
      const strictThumb = strictPage.locator('.turn-input img.thumb');
      await strictThumb.waitFor();
      await expect
        .poll(() => strictThumb.evaluate((image) => (image as HTMLImageElement).naturalWidth), { timeout: 15_000 })
        .toBe(40);
    } finally {
      await strict.close();
    }
  });

  it('forks at a turn and opens the fork, which links its parent', { timeout: 60_000 }, async () => {
    const turn = page.locator('#timeline details.turn[data-turn="1"]');
    expect(await page.locator('#session-lineage').textContent()).toBe('');
    await turn.getByRole('button', { name: 'Fork here' }).click();
    await expect
      .poll(() => page.locator('#session-title').textContent(), { timeout: 15_000 })
      .not.toBe(`Session ${imageSession}`);
    const forkId = decodeURIComponent(/#\/s\/(.+)$/.exec(page.url())![1]!);
    const fork = await call('GET', `/v1/sessions/${forkId}`);
    expect(fork.forked_from.id).toBe(imageSession);
    await expect
      .poll(() => page.locator('#session-lineage').textContent())
      .toBe(`Fork of ${imageSession} after seq ${fork.forked_from.seq}`);
    await page.locator('#session-lineage a').click();
    await expect.poll(() => page.locator('#session-title').textContent()).toBe(`Session ${imageSession}`);
    // The parent lists its fork, linked.
    const listed = page.locator('#session-forks li');
    await expect
      .poll(() => listed.allTextContents(), { timeout: 15_000 })
      .toEqual([`${forkId} after seq ${fork.forked_from.seq}`]);
    await listed.getByRole('link', { name: forkId }).click();
    await expect.poll(() => page.locator('#session-title').textContent()).toBe(`Session ${forkId}`);
    await expect.poll(() => page.locator('#session-forks').textContent()).toBe('');
  });

  it('follows a running turn live, refuses a fork at it, and cancels it', { timeout: 90_000 }, async () => {
    const liveSession = `${sessionId}-live`;
    const live = await followedLive(liveSession, 'hold on', { strategies: ['inbox'] });
    expect((await call('GET', `/v1/sessions/${liveSession}/turns/1`)).status).toBe('in_progress');
    const row = page.locator('#timeline details.turn[data-turn="1"]');
    await row.locator('summary').click();
    await row.getByRole('button', { name: 'Fork here' }).click();
    await expect.poll(() => row.locator('.fork-error').textContent(), { timeout: 15_000 }).toMatch(/^Fork refused: ./);
    expect(await live.locator('p > span').first().textContent()).toBe('Turn 1 running');
    // An input queued behind the running turn: it runs once the turn is cancelled, and shows as its turn.
    const queued = await call('POST', `/v1/sessions/${liveSession}/turns`, {
      input: 'next',
      model: 'echo',
      on_busy: 'enqueue',
    });
    expect(queued.position).toBe(1);
    // Listed as queued before it runs (the page read again), gone once a turn took it up.
    await page.reload();
    const queuedRows = page.locator('#queue-list li');
    await expect.poll(() => queuedRows.allTextContents(), { timeout: 15_000 }).toEqual(['next (1 item) Withdraw']);
    expect(await queuedRows.first().getAttribute('data-queued-turn')).toBe(queued.queued_turn);
    await live.getByRole('button', { name: 'Cancel' }).click();
    await expect.poll(() => queuedRows.count(), { timeout: 30_000 }).toBe(0);
    expect(await page.locator('#queue-empty').textContent()).toBe('Nothing queued.');
    await expect.poll(() => row.getAttribute('class'), { timeout: 15_000 }).toContain('status-cancelled');
    expect(await row.locator('summary').textContent()).toContain('Turn 1 · cancelled');
    expect(await page.locator('#timeline .live').count()).toBe(0);
    expect(await axeViolations(page)).toEqual([]);
    await expect
      .poll(async () => (await call('GET', `/v1/sessions/${liveSession}/turns?limit=1`)).turns[0].turn, {
        timeout: 30_000,
      })
      .toBe(2);
    await page.reload();
    const next = page.locator('#timeline details.turn[data-turn="2"]');
    await expect.poll(() => next.getAttribute('class'), { timeout: 30_000 }).toContain('status-completed');
    await next.locator('summary').click();
    await expect
      .poll(() => next.locator('.turn-output li pre').first().textContent(), { timeout: 15_000 })
      .toBe('assistant: echo: next');
  });

  it('draws a followed turn into the charts once it ended, without a reload', { timeout: 90_000 }, async () => {
    const liveSession = `${sessionId}-charted`;
    await followedLive(liveSession, 'finish when told');
    // Running: its bar has no prompt yet, and it has no cost bar (no usage).
    const bar = page.locator('#strip-chart rect.bar-total title');
    expect(await bar.allTextContents()).toEqual(['turn 1: no prompt yet']);
    expect(await page.locator('#cost-chart rect.bar-cost').count()).toBe(0);
    // Expanded while it runs, it stays expanded once it ended, with its output.
    const row = page.locator('#timeline details.turn[data-turn="1"]');
    await row.locator('summary').click();
    await row.locator('.turn-output').waitFor();
    release();
    await expect.poll(() => row.getAttribute('class'), { timeout: 30_000 }).toContain('status-completed');
    expect(await row.getAttribute('open')).toBe('');
    await expect
      .poll(() => row.locator('.turn-output li pre').first().textContent())
      .toBe('assistant: Hello! How can I');
    const { context } = await call('GET', `/v1/sessions/${liveSession}/turns/1`);
    expect(context.prompt_chars).toBeGreaterThan(0);
    await expect
      .poll(() => bar.allTextContents(), { timeout: 15_000 })
      .toEqual([`turn 1: ${context.prompt_chars} chars, 0 reused`]);
    expect(await page.locator('#cost-chart rect.bar-cost').count()).toBe(1);
    expect(await page.locator('#cost-chart rect.bar-cost title').textContent()).toMatch(/^turn 1/);
    // The fake provider's model has no price: its cost is unknown, not $0.
    expect(await page.locator('#cost-chart .axis-y span').allTextContents()).toEqual(['no price · 100%', '0']);
    expect(await page.locator('#cost-chart .legend li').first().textContent()).toBe(
      'cost (unknown: no turn has a price)',
    );
  });

  it('has a favicon, served by the service', async () => {
    const href = await page.locator('link[rel="icon"]').getAttribute('href');
    const response = await page.request.get(new URL(href!, server.origin).href);
    expect(response.status()).toBe(200);
    expect(response.headers()['content-type']).toBe('image/svg+xml');
    expect(await response.text()).toMatch(/^<svg /);
  });

  it('"New session" asks for an id: one given, none (a generated id), or cancelled', { timeout: 60_000 }, async () => {
    const newId = `${sessionId}-new`;
    const open = async (answer: string | null) => {
      await page.goto(`${server.origin}/ui#/`);
      await page.locator(`tr[data-id="${sessionId}"]`).waitFor();
      page.once('dialog', (dialog) => {
        expect(dialog.type()).toBe('prompt');
        void (answer === null ? dialog.dismiss() : dialog.accept(answer));
      });
      await page.getByRole('button', { name: 'New session' }).click();
    };
    await open(newId);
    await expect.poll(() => page.locator('#session-title').textContent()).toBe(`Session ${newId}`);
    expect(page.url()).toContain(`#/s/${newId}`);
    expect((await call('GET', `/v1/sessions/${newId}`)).id).toBe(newId);
    await open('');
    await expect.poll(() => page.url()).toMatch(/#\/s\/.+/);
    const generated = decodeURIComponent(/#\/s\/(.+)$/.exec(page.url())![1]!);
    expect(generated).not.toBe(newId);
    expect((await call('GET', `/v1/sessions/${generated}`)).id).toBe(generated);
    await open(null);
    expect(page.url()).toMatch(/#\/$/);
    expect(await page.locator('#list-view').isVisible()).toBe(true);
  });

  it('logs no console errors but the ones the tests cause on purpose', () => {
    // Chromium logs every 4xx fetch as a console error; the 401s of the refused token and the
    // 409 of the aborted turn are the ones these tests cause on purpose.
    expect(
      consoleErrors.filter(
        (text) => !/Failed to load resource: the server responded with a status of (401|409)/.test(text),
      ),
    ).toEqual([]);
  });
});
