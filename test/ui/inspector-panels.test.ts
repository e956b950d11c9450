import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  apiCaller,
  axeViolations,
  INSPECTOR_HOOK_MS,
  type InspectorNode,
  startInspectorNode,
} from '../support/inspector-node.ts';

/**
 * The inspector's panels in Debian's Chromium against the Node server (functions/node.ts, files
 * in a temporary DATA_DIR): a panel that failed to load says so in place with a Retry button, the
 * chat box stays reachable in the one-column layout, counts read in the singular for one, and
 * the chat box sends an image with its text.
 */
const TOKEN = 'ui-panels-token';
let node: InspectorNode;

beforeAll(async () => {
  node = await startInspectorNode({ API_TOKEN: TOKEN });
}, INSPECTOR_HOOK_MS);

afterAll(() => node?.close());

const call = apiCaller(() => node.origin, TOKEN);

/** The inspector at `hash`, in a tab of its own holding the token, `width` pixels wide. */
async function open(hash: string, width = 1400, height = 1000): Promise<Page> {
  const context = await node.browser.newContext({ viewport: { width, height } });
  await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), TOKEN);
  const page = await context.newPage();
  await page.goto(`${node.origin}/ui${hash}`);
  return page;
}

/** Session `id` with `turns` turns taken. */
async function sessionWithTurns(id: string, turns: number): Promise<void> {
  await call('POST', '/v1/sessions', { id });
  for (let index = 1; index <= turns; index++) await call('POST', `/v1/sessions/${id}/turns`, { input: `t${index}` });
}

describe("the inspector's panels", () => {
  it("a fork's turns run in its parent, which its totals leave out, are marked so", { timeout: 60_000 }, async () => {
    await sessionWithTurns('lineage-turns', 2);
    await call('POST', '/v1/sessions/lineage-turns/fork', { at_turn: 1, id: 'lineage-turns-fork' });
    await call('POST', '/v1/sessions/lineage-turns-fork/turns', { input: 'own' });
    const page = await open('#/s/lineage-turns-fork');
    const summary = (turn: number) => page.locator(`#timeline details.turn[data-turn="${turn}"] summary`);
    await summary(2).waitFor();
    expect(await summary(1).locator('.parent-mark').textContent()).toBe(" parent's turn");
    expect(await summary(2).locator('.parent-mark').count()).toBe(0);
    await page.context().close();
  });

  it('the inbox, the forks and the queue that failed to load say so in place, and load on Retry', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('panel-errors', 1);
    await call('POST', '/v1/sessions/panel-errors/fork', { at_turn: 1, id: 'panel-errors-fork' });
    await call('POST', '/v1/sessions/panel-errors/inbox', { name: 'n.md', content: 'note' });
    const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
    await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), TOKEN);
    const page = await context.newPage();
    for (const rest of ['/inbox', '/forks', '/queue'])
      await page.route(
        (url) => url.pathname === `/v1/sessions/panel-errors${rest}`,
        (route) => route.abort(),
        {
          times: 1,
        },
      );
    await page.goto(`${node.origin}/ui#/s/panel-errors`);
    for (const [panel, what] of [
      ['#inbox-section', 'The pending notices'],
      ['#session-forks', 'The forks'],
      ['#queue-section', 'The queue'],
    ] as const) {
      const error = page.locator(`${panel} .load-error`);
      await expect.poll(() => error.first().textContent()).toBe(`${what} could not be loaded (Failed to fetch). Retry`);
      expect(await error.count()).toBe(1);
      expect(await error.getAttribute('role')).toBe('alert');
      await error.getByRole('button', { name: 'Retry' }).click();
      await expect.poll(() => page.locator(`${panel} .load-error`).count()).toBe(0);
    }
    await expect.poll(() => page.locator('#inbox-pending li').textContent()).toBe('n.md (4 bytes)');
    await expect.poll(() => page.locator('#session-forks li a').textContent()).toBe('panel-errors-fork');
    await expect.poll(() => page.locator('#queue-empty').textContent()).toBe('Nothing queued.');
    expect(await page.locator('#status').textContent()).toBe('');
    await context.close();
  });

  it('an inbox or a queue of a session left before it failed to load shows nothing in the next one', {
    timeout: 60_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'left-a' });
    await call('POST', '/v1/sessions/left-a/inbox', { name: 'a.md', content: 'of a' });
    await call('POST', '/v1/sessions', { id: 'left-b' });
    const page = await open('');
    let fail = () => {};
    const failed = new Promise<void>((resolve) => {
      fail = resolve;
    });
    for (const rest of ['/inbox', '/queue'])
      await page.route(
        (url) => url.pathname === `/v1/sessions/left-a${rest}`,
        async (route) => {
          await failed;
          await route.abort();
        },
      );
    const aborted = Promise.all(
      ['/inbox', '/queue'].map((rest) =>
        page.waitForEvent('requestfailed', (request) => new URL(request.url()).pathname.endsWith(`left-a${rest}`)),
      ),
    );
    await page.goto(`${node.origin}/ui#/s/left-a`);
    await page.evaluate(() => {
      location.hash = '#/s/left-b';
    });
    await expect.poll(() => page.locator('#inbox-pending-more').textContent()).toBe('None.');
    await expect.poll(() => page.locator('#queue-empty').textContent()).toBe('Nothing queued.');
    fail();
    await aborted;
    // The view shows left-b's inbox and queue, with no error (nor a Retry loading left-a's).
    // A task after the failures: their handlers have run.
    await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 0)));
    expect(await page.locator('.load-error').count()).toBe(0);
    expect(await page.locator('#inbox-pending-more').textContent()).toBe('None.');
    expect(await page.locator('#queue-empty').textContent()).toBe('Nothing queued.');
    await context(page).close();
  });

  it('the turns of a session left before they came change nothing in the next one’s timeline and charts', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('late-a', 3);
    await sessionWithTurns('late-b', 1);
    const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
    await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), TOKEN);
    // Marks in the page when late-a's turns were read there (as the inspector reads an answer).
    await context.addInitScript(() => {
      const text = Response.prototype.text;
      Response.prototype.text = async function (this: Response) {
        const read = await text.call(this);
        if (new URL(this.url).pathname === '/v1/sessions/late-a/turns') document.body.dataset.lateRead = 'yes';
        return read;
      };
    });
    const page = await context.newPage();
    let release = () => {};
    const released = new Promise<void>((resolve) => {
      release = resolve;
    });
    let held = () => {};
    const holding = new Promise<void>((resolve) => {
      held = resolve;
    });
    await page.route(
      (url) => url.pathname === '/v1/sessions/late-a/turns',
      async (route) => {
        held();
        await released;
        await route.continue();
      },
    );
    await page.goto(`${node.origin}/ui#/s/late-a`);
    await holding;
    await page.evaluate(() => {
      location.hash = '#/s/late-b';
    });
    await expect.poll(() => page.locator('#timeline-more').textContent()).toBe('1 turn');
    const prompt = page.locator('#strip-chart svg');
    const cost = page.locator('#cost-chart svg');
    await expect.poll(() => prompt.getAttribute('aria-label')).toMatch(/^Prompt size of 1 turn /);
    await expect.poll(() => cost.getAttribute('aria-label')).toBe('Cost and cache-read share of 1 turn');
    release();
    await page.locator('body[data-late-read="yes"]').waitFor({ state: 'attached' });
    // A task after late-a's turns were read: what they would draw, they have drawn.
    await page.evaluate(() => new Promise((resolve) => setTimeout(resolve, 0)));
    expect(await prompt.getAttribute('aria-label')).toMatch(/^Prompt size of 1 turn /);
    expect(await cost.getAttribute('aria-label')).toBe('Cost and cache-read share of 1 turn');
    expect(await page.locator('#strip-chart .axis-x').textContent()).toBe('turn 1turn 1');
    expect(await page.locator('#timeline details.turn').count()).toBe(1);
    expect(await page.locator('#timeline-more').textContent()).toBe('1 turn');
    await context.close();
  });

  it('a page of older turns that failed to load says so at the list’s end, and loads on Retry', {
    timeout: 120_000,
  }, async () => {
    await sessionWithTurns('older-error', 31);
    const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
    await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), TOKEN);
    const page = await context.newPage();
    await page.route(
      (url) => url.pathname === '/v1/sessions/older-error/turns' && url.searchParams.has('before'),
      (route) => route.abort(),
      { times: 1 },
    );
    await page.goto(`${node.origin}/ui#/s/older-error`);
    await page.locator('details.turn[data-turn="2"]').waitFor();
    await page.locator('#timeline-more').scrollIntoViewIfNeeded();
    const error = page.locator('#timeline-more .load-error');
    await expect.poll(() => error.textContent()).toBe('More turns could not be loaded (Failed to fetch). Retry');
    await error.getByRole('button', { name: 'Retry' }).click();
    await page.locator('details.turn[data-turn="1"]').waitFor();
    await expect.poll(() => page.locator('#timeline-more').textContent()).toBe('31 turns');
    expect(await page.locator('#status').textContent()).toBe('');
    await context.close();
  });

  it('the first page of the sessions and of the turns loads though the observer never reports', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('no-observer', 2);
    const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
    await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), TOKEN);
    // A renderer the browser throttles (a tab in the background, or just reloaded) may report
    // no intersection for long: here, never.
    await context.addInitScript(() => {
      window.IntersectionObserver = class {
        observe() {}
        unobserve() {}
        disconnect() {}
        takeRecords() {
          return [];
        }
      } as unknown as typeof IntersectionObserver;
    });
    const page = await context.newPage();
    await page.goto(`${node.origin}/ui#/s/no-observer`);
    await page.locator('details.turn[data-turn="1"]').waitFor({ timeout: 15_000 });
    await expect.poll(() => page.locator('#timeline-more').textContent()).toBe('2 turns');
    await page.goto(`${node.origin}/ui#/`);
    await page.locator('#session-table tr[data-id="no-observer"]').waitFor({ timeout: 15_000 });
    await context.close();
  });

  it('in the one-column layout the chat box stays in view over a long timeline', { timeout: 120_000 }, async () => {
    await sessionWithTurns('narrow-chat', 30);
    const page = await open('#/s/narrow-chat', 420, 800);
    await page.locator('details.turn[data-turn="1"]').waitFor();
    const inView = () =>
      page.locator('#chat-input').evaluate((input) => {
        const box = input.getBoundingClientRect();
        return box.top >= 0 && box.bottom <= window.innerHeight;
      });
    expect(await inView()).toBe(true);
    await page.locator('details.turn[data-turn="15"]').scrollIntoViewIfNeeded();
    expect(await inView()).toBe(true);
    expect(await axeViolations(page)).toEqual([]);
    // A row scrolled into view at the window's bottom edge (as focus and find do) shows above the box.
    const covered = () =>
      page.locator('details.turn[data-turn="1"] summary').evaluate((summary) => {
        window.scrollTo(0, 0);
        summary.scrollIntoView({ block: 'nearest' });
        const box = summary.getBoundingClientRect();
        return !summary.contains(document.elementFromPoint(box.left + 5, box.top + box.height / 2));
      });
    expect(await covered()).toBe(false);
    // It covers no turn's row at the end of the timeline.
    await page.locator('#chat-input').fill('from a phone');
    await page.locator('#chat-send').click();
    await page.locator('details.turn[data-turn="31"]').waitFor();
    await context(page).close();
  });

  it('counts of one read in the singular', { timeout: 60_000 }, async () => {
    await call('POST', '/v1/sessions', { id: 'singular' });
    await call('POST', '/v1/sessions/singular/inbox', { name: 'one.md', content: 'x' });
    await call('POST', '/v1/sessions/singular/turns', {
      input: [
        { type: 'function_call', call_id: 'c1', name: 'look', arguments: '{}' },
        { type: 'function_call_output', call_id: 'c1', output: 'o' },
      ],
    });
    const page = await open('#/s/singular');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    await expect.poll(() => page.locator('#timeline-more').textContent()).toBe('1 turn');
    expect(await page.locator('#session-counts').textContent()).toContain('1 turn · 1 tool call ·');
    expect(await page.locator('#session-counts').textContent()).toContain('(1 completed turn,');
    expect(await page.locator('details.turn[data-turn="1"] .inbox-mark').textContent()).toBe(' 1 notice');
    await context(page).close();
  });

  it("a delivery record under no turn (its turn closed by someone else) reads as the next turn's", {
    timeout: 60_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'no-turn' });
    for (const name of ['held.md', 'delivered.md']) {
      await call('POST', '/v1/sessions/no-turn/inbox', { name, content: name });
      await call('POST', '/v1/sessions/no-turn/turns', { input: `after ${name}` });
    }
    const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
    await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), TOKEN);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())));
    page.on('pageerror', (error) => void errors.push(error.message));
    // The server's page, as a session answers it whose dead turn took `held.md` and no turn delivered it yet.
    await page.route(
      (url) => url.pathname === '/v1/sessions/no-turn/inbox/delivered',
      async (route) => {
        const answer = await route.fetch();
        const body = await answer.json();
        for (const record of body.delivered) if (record.name === 'held.md') record.turn = null;
        await route.fulfill({ response: answer, json: body });
      },
    );
    await page.goto(`${node.origin}/ui#/s/no-turn`);
    await expect
      .poll(() => page.locator('#inbox-delivered li').allTextContents())
      .toEqual(['delivered.md → turn 2', 'held.md → the next turn (a turn closed by someone else took it)']);
    expect(await page.locator('#status').textContent()).toBe('');
    expect(errors).toEqual([]);
    await context.close();
  });

  it('the chat box sends an image, picked or pasted, with its text as one message', { timeout: 60_000 }, async () => {
    await call('POST', '/v1/sessions', { id: 'chat-image' });
    const page = await open('#/s/chat-image');
    await page.locator('#timeline-more').filter({ hasText: '0 turns' }).waitFor();
    await page.locator('#chat-image').setInputFiles({ name: 'dot.png', mimeType: 'image/png', buffer: PNG });
    await expect.poll(() => page.locator('#chat-attached').textContent()).toBe('dot.png (68 bytes) Remove');
    expect(await page.locator('#chat-attached img').getAttribute('alt')).toBe('dot.png, to be sent');
    expect(await axeViolations(page)).toEqual([]);
    await page.locator('#chat-input').fill('what is this?');
    await page.locator('#chat-send').click();
    await expect.poll(() => page.locator('#chat-output').textContent()).toContain('[turn 1 completed]');
    expect(await page.locator('#chat-attached').textContent()).toBe('');
    // The user's messages, oldest first.
    const inputs = async () =>
      ((await call('GET', '/v1/sessions/chat-image/items')).items as any[])
        .filter((item) => item.role === 'user')
        .sort((a, b) => a.seq - b.seq);
    expect((await inputs())[0].content).toEqual([
      { type: 'input_text', text: 'what is this?' },
      expect.objectContaining({ type: 'input_image', media_type: 'image/png', bytes: 68, width: 1, height: 1 }),
    ]);
    // A pasted image is attached as a picked one: an image alone is a turn.
    await page.locator('#chat-input').focus();
    await page.evaluate(
      (bytes) => {
        const data = new DataTransfer();
        data.items.add(new File([new Uint8Array(bytes)], 'pasted.png', { type: 'image/png' }));
        document
          .getElementById('chat-input')!
          .dispatchEvent(new ClipboardEvent('paste', { clipboardData: data, bubbles: true, cancelable: true }));
      },
      [...PNG],
    );
    await expect.poll(() => page.locator('#chat-attached').textContent()).toBe('pasted.png (68 bytes) Remove');
    // Remove, from the keyboard, leaves the focus in the form, on the picker.
    await page.getByRole('button', { name: 'Remove' }).focus();
    await page.keyboard.press('Enter');
    expect(await page.locator('#chat-attached').textContent()).toBe('');
    expect(await page.evaluate(() => document.activeElement?.id)).toBe('chat-image');
    await page.locator('#chat-image').setInputFiles({ name: 'pasted.png', mimeType: 'image/png', buffer: PNG });
    await page.locator('#chat-send').click();
    await expect.poll(() => page.locator('#chat-output').textContent()).toContain('[turn 2 completed]');
    expect((await inputs())[1].content).toEqual([expect.objectContaining({ type: 'input_image', bytes: 68 })]);
    await context(page).close();
  });

  it('a new session says its inbox is empty, Ctrl+Enter sends, and a refused save says why beside the form', {
    timeout: 60_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'first-look' });
    const page = await open('#/s/first-look');
    await expect.poll(() => page.locator('#inbox-pending-more').textContent()).toBe('None.');
    await expect.poll(() => page.locator('#inbox-delivered-more').textContent()).toBe('None.');
    expect(await page.locator('#config-strategies').getAttribute('placeholder')).toBe('default');
    await page.locator('#chat-input').fill('by keyboard');
    await page.locator('#chat-input').press('Control+Enter');
    await expect.poll(() => page.locator('#chat-output').textContent()).toBe('echo: by keyboard\n[turn 1 completed]');
    await page.locator('#config-strategies').fill('no_such_strategy');
    await expect.poll(() => page.locator('#config-status').textContent()).toMatch(/^Preview: .*no_such_strategy/);
    await page.getByRole('button', { name: 'Save (PATCH)' }).click();
    await expect.poll(() => page.locator('#config-status').textContent()).toMatch(/^Not saved: .*no_such_strategy/);
    expect(await page.locator('#status').textContent()).toBe('');
    await context(page).close();
  });
});

const context = (page: Page) => page.context();

/** A 1x1 PNG. */
const PNG = Buffer.from(
  'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=',
  'base64',
);
