import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { usageText } from '../../functions/ui/client/format.ts';
import { type FakeProvider, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import {
  apiCaller,
  chunk,
  finish,
  INSPECTOR_HOOK_MS,
  type InspectorNode,
  startInspectorNode,
} from '../support/inspector-node.ts';

/**
 * The inspector's live updates (functions/ui/client/poll.ts) in Debian's Chromium against the
 * Node server (files in a temporary DATA_DIR): what another client does while a view is open
 * shows without a reload, keeping what the reader expanded and where they scrolled, and a
 * failed poll shows a state the reader can recover from. Each test waits for what it expects
 * (a poll every 5 s), never for a time.
 */
const TOKEN = 'ui-live-token';
let node: InspectorNode;
let provider: FakeProvider;
/** Lets the fake provider's model end the answer it began (a turn on `openai-compatible:fake`). */
let release: () => void = () => undefined;
/** What the fake model writes, a line at a time, to a turn asked to `write lines`. */
const LINES = Array.from({ length: 40 }, (_, index) => `line ${index + 1}`);

beforeAll(async () => {
  provider = await startFakeProvider((request) => ({
    // Asked for lines, a slow model: after its first words, a line at a time.
    sse: JSON.stringify(request.body).includes('write lines')
      ? chunk('Hello') + LINES.map((line) => chunk(`\n${line}`)).join('') + finish()
      : chunk('Hello') + finish(),
    gapMs: 5,
    pause: { after: 1, until: new Promise<void>((resolve) => (release = resolve)) },
  }));
  node = await startInspectorNode({ API_TOKEN: TOKEN, OPENAI_COMPATIBLE_BASE_URL: provider.baseURL });
}, INSPECTOR_HOOK_MS);

afterAll(async () => {
  await node?.close();
  await provider?.close();
});

const call = apiCaller(() => node.origin, TOKEN);

/** The inspector at `hash` in a tab of its own holding the token; a mark on its window tells a reload. */
async function open(hash: string): Promise<Page> {
  const context = await node.browser.newContext({ viewport: { width: 1200, height: 700 } });
  await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), TOKEN);
  const page = await context.newPage();
  await page.goto(`${node.origin}/ui${hash}`);
  await page.evaluate(() => ((window as any).notReloaded = true));
  return page;
}

/**
 * Holds the page's requests that `matches` (the first `times` of them, or all) until `release`:
 * `asked` settles once the first is held. A held request goes to the server when released.
 */
async function hold(page: Page, matches: (url: URL) => boolean, times?: number) {
  let held!: () => void;
  const asked = new Promise<void>((resolve) => (held = resolve));
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  await page.route(
    matches,
    async (route) => {
      held();
      await released;
      await route.continue().catch(() => undefined);
    },
    times === undefined ? {} : { times },
  );
  return { asked, release };
}

const notReloaded = (page: Page) => page.evaluate(() => (window as any).notReloaded === true);

describe('the inspector follows what other clients do', () => {
  it('a turn run by another client shows in the open session, keeping expanded rows and the scroll position', {
    timeout: 90_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'watched' });
    for (let index = 1; index <= 12; index++) await call('POST', '/v1/sessions/watched/turns', { input: `t${index}` });
    const page = await open('#/s/watched');
    const row = (turn: number) => page.locator(`#timeline details.turn[data-turn="${turn}"]`);
    // Chromium keeps the reader's place by scroll anchoring; without it (as in a browser that
    // has none), the timeline keeps it itself. Anchoring is off for the whole page: off for the
    // timeline alone, Chromium anchors to what follows it, and moves the rows when one above grows.
    await page.evaluate(() => (document.documentElement.style.overflowAnchor = 'none'));
    // Turn 6 expanded (all of it loaded), and scrolled to the top of the viewport, the rows above it out of view.
    await row(6).locator('summary').click();
    await row(6).locator('.turn-seen', { hasText: 'Start of the history.' }).waitFor();
    await page.evaluate(() => {
      (document.querySelector('details.turn[data-turn="6"]') as any).marked = true;
      document.querySelector('details.turn[data-turn="6"]')!.scrollIntoView({ block: 'start' });
    });
    const top = () => row(6).evaluate((details) => details.getBoundingClientRect().top);
    const before = await top();
    expect(await page.locator('#timeline').evaluate((list) => list.getBoundingClientRect().top < 0)).toBe(true);

    await call('POST', '/v1/sessions/watched/turns', { input: 'from elsewhere' });
    await row(13).waitFor({ state: 'attached', timeout: 30_000 });
    expect(await page.locator('#timeline details.turn').first().getAttribute('data-turn')).toBe('13');
    // The expanded row is the same element, still open, where it was on the screen.
    expect(await row(6).evaluate((details) => (details as any).marked === true && details.hasAttribute('open'))).toBe(
      true,
    );
    expect(Math.abs((await top()) - before)).toBeLessThanOrEqual(1);
    const session = await call('GET', '/v1/sessions/watched');
    expect(await page.locator('#session-counts').textContent()).toContain(`${session.counts.items} items · 13 turns`);
    expect(await page.locator('#strip-chart rect.bar-total').count()).toBe(13);
    // Items appended by another client: the counts line.
    await call('POST', '/v1/sessions/watched/items', { items: [{ type: 'message', role: 'user', content: 'note' }] });
    await expect
      .poll(() => page.locator('#session-counts').textContent(), { timeout: 30_000 })
      .toContain(`${session.counts.items + 1} items`);
    // A background turn: shown once claimed, then in its final state.
    const queued = await call('POST', '/v1/sessions/watched/turns', { input: 'in the background', background: true });
    await expect.poll(() => row(queued.turn).getAttribute('class'), { timeout: 30_000 }).toContain('status-completed');
    expect(await page.locator('#timeline details.turn').count()).toBe(14);
    expect(await page.locator('#live-state').isHidden()).toBe(true);
    expect(await notReloaded(page)).toBe(true);
    await page.context().close();
  });

  /**
   * A session of 12 turns and a 13th running in the background on the fake model (`input`), its
   * page open as in a browser without scroll anchoring (above) and the live updates' reads of the
   * session held, so that the turn's follower alone draws its text and its end; turn 6 expanded
   * and scrolled to the top, where the reader looks (`top`, at first `before`).
   */
  async function readerBelowARunningTurn(id: string, input: string) {
    await call('POST', '/v1/sessions', { id });
    for (let index = 1; index <= 12; index++) await call('POST', `/v1/sessions/${id}/turns`, { input: `t${index}` });
    const running = await call('POST', `/v1/sessions/${id}/turns`, {
      input,
      model: 'openai-compatible:fake',
      background: true,
    });
    const page = await open(`#/s/${id}`);
    const row = (turn: number) => page.locator(`#timeline details.turn[data-turn="${turn}"]`);
    await expect.poll(() => page.locator('#timeline .live-text').textContent(), { timeout: 30_000 }).toBe('Hello');
    await page.evaluate(() => (document.documentElement.style.overflowAnchor = 'none'));
    const polls = await hold(page, (url) => url.pathname === `/v1/sessions/${id}`);
    await row(6).locator('summary').click();
    await row(6).locator('.turn-seen', { hasText: 'Start of the history.' }).waitFor();
    await row(6).evaluate((details) => details.scrollIntoView({ block: 'start' }));
    const top = () => row(6).evaluate((details) => details.getBoundingClientRect().top);
    const before = await top();
    expect(await page.locator('#timeline').evaluate((list) => list.getBoundingClientRect().top < 0)).toBe(true);
    return { running, page, row, top, before, polls };
  }

  it('a followed turn ending above the reader leaves the rows the reader looks at where they were', {
    timeout: 90_000,
  }, async () => {
    const { running, page, row, top, before, polls } = await readerBelowARunningTurn('ending', 'hold on');
    release();
    await expect.poll(() => row(running.turn).getAttribute('class'), { timeout: 30_000 }).toContain('status-completed');
    expect(await page.locator('#timeline .live').count()).toBe(0);
    expect(Math.abs((await top()) - before)).toBeLessThanOrEqual(1);
    polls.release();
    await page.context().close();
  });

  it('a followed turn whose text grows above the reader leaves the rows the reader looks at where they were', {
    timeout: 90_000,
  }, async () => {
    const { running, page, row, top, before, polls } = await readerBelowARunningTurn('growing', 'write lines');
    // Where the reader's row is each time the live text grew, with the lines shown then.
    await page.evaluate(() => {
      const text = document.querySelector('#timeline .live-text')!;
      const details = document.querySelector('details.turn[data-turn="6"]')!;
      const seen: { lines: number; top: number }[] = [];
      (window as any).grown = seen;
      new MutationObserver(() =>
        seen.push({ lines: text.textContent!.split('\n').length, top: details.getBoundingClientRect().top }),
      ).observe(text, { childList: true, characterData: true, subtree: true });
    });
    release();
    await expect.poll(() => row(running.turn).getAttribute('class'), { timeout: 30_000 }).toContain('status-completed');
    const grown: { lines: number; top: number }[] = await page.evaluate(() => (window as any).grown);
    expect(Math.max(...grown.map((seen) => seen.lines))).toBe(LINES.length + 1);
    for (const seen of grown) expect(Math.abs(seen.top - before)).toBeLessThanOrEqual(1);
    expect(Math.abs((await top()) - before)).toBeLessThanOrEqual(1);
    polls.release();
    await page.context().close();
  });

  it('a refused Cancel of a followed turn above the reader leaves the rows the reader looks at where they were', {
    timeout: 90_000,
  }, async () => {
    const { running, page, row, top, before, polls } = await readerBelowARunningTurn('cancel-refused', 'hold on');
    // The API refuses the cancel with a reason long enough to take a line of its own under the turn's row.
    const reason = `The turn cannot be cancelled now: ${'its runner is finishing a step of the answer, '.repeat(6)}`;
    await page.route(
      (url) => url.pathname === `/v1/sessions/cancel-refused/turns/${running.turn}/cancel`,
      (route) =>
        route.fulfill({
          status: 409,
          contentType: 'application/json',
          body: JSON.stringify({ error: { code: 'conflict', message: reason } }),
        }),
    );
    const live = page.locator('#timeline .live');
    const height = await live.evaluate((box) => box.getBoundingClientRect().height);
    // Pressed where it is, out of view: a click by the mouse would scroll to it.
    await live.getByRole('button', { name: 'Cancel' }).evaluate((button: HTMLButtonElement) => button.click());
    await expect.poll(() => live.locator('.error').textContent()).toBe(`Cancel refused: ${reason}`);
    expect(await live.evaluate((box) => box.getBoundingClientRect().height)).toBeGreaterThan(height);
    expect(Math.abs((await top()) - before)).toBeLessThanOrEqual(1);
    release();
    await expect.poll(() => row(running.turn).getAttribute('class'), { timeout: 30_000 }).toContain('status-completed');
    polls.release();
    await page.context().close();
  });

  it('a turn cancelled from its row shows what its stopped call spent, stored after the cancel', {
    timeout: 90_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'cancel-spend' });
    const running = await call('POST', '/v1/sessions/cancel-spend/turns', {
      input: 'hold on',
      model: 'openai-compatible:fake',
      background: true,
    });
    const page = await open('#/s/cancel-spend');
    const live = page.locator('#timeline .live');
    await expect.poll(() => live.locator('.live-text').textContent(), { timeout: 30_000 }).toBe('Hello');
    await live.getByRole('button', { name: 'Cancel' }).click();
    const row = page.locator(`#timeline details.turn[data-turn="${running.turn}"]`);
    await expect.poll(() => row.getAttribute('class'), { timeout: 30_000 }).toContain('status-cancelled');
    // The stopped call's spend, as the API gives it once stored (the cancel is answered before).
    const spent = await expect
      .poll(async () => (await call('GET', `/v1/sessions/cancel-spend/turns/${running.turn}`)).usage, {
        timeout: 30_000,
      })
      .not.toBeNull()
      .then(async () => (await call('GET', `/v1/sessions/cancel-spend/turns/${running.turn}`)).usage);
    await expect.poll(() => row.locator('summary').textContent(), { timeout: 30_000 }).toContain(usageText(spent));
    // Expanded: no strategies named and no receipt (it stored none), though its model was called.
    await row.locator('summary').click();
    const seen = row.locator('.turn-seen p');
    await seen.waitFor();
    expect(await row.locator('.turn-times').textContent()).not.toContain('strategies');
    expect(await seen.textContent()).toBe('No receipt: the turn ended without storing what its model saw.');
    await page.context().close();
  });

  it('the row the reader looks at, drawn again as newer turns come, stays where it was', {
    timeout: 120_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'redrawn' });
    for (let index = 1; index <= 25; index++) await call('POST', '/v1/sessions/redrawn/turns', { input: `t${index}` });
    const page = await open('#/s/redrawn');
    const row = (turn: number) => page.locator(`#timeline details.turn[data-turn="${turn}"]`);
    await row(25).waitFor();
    await page.evaluate(() => (document.documentElement.style.overflowAnchor = 'none'));
    // The newest row at the top of the viewport, its first pixels out of view, and marked.
    await row(25).evaluate((details) => {
      (details as any).marked = true;
      details.parentElement!.scrollIntoView({ block: 'start' });
      window.scrollBy(0, 4);
    });
    const top = () => row(25).evaluate((details) => details.parentElement!.getBoundingClientRect().top);
    const before = await top();
    expect(await page.locator('#timeline').evaluate((list) => list.getBoundingClientRect().top < 0)).toBe(true);
    // Between two polls, another client deletes turn 25 and takes two turns: 25 again, and 26.
    const { asked, release } = await hold(page, (url) => url.pathname === '/v1/sessions/redrawn', 1);
    await asked;
    await call('DELETE', '/v1/sessions/redrawn/turns/25');
    for (const input of ['t25 again', 't26']) await call('POST', '/v1/sessions/redrawn/turns', { input });
    release();
    // Long enough on a loaded machine for two failed polls' backoff (10 s, then 20 s: poll.ts), or
    // for a poll left unanswered to be given up (30 s) and the next 10 s later; a failure says
    // what the page's live-update line said.
    await row(26)
      .waitFor({ state: 'attached', timeout: 60_000 })
      .catch(async (error: Error) => {
        const state = await page.locator('#live-message').textContent();
        throw new Error(`${error.message}\nthe live-update line: ${JSON.stringify(state)}`);
      });
    expect(await row(25).evaluate((details) => (details as any).marked === true)).toBe(false);
    expect(Math.abs((await top()) - before)).toBeLessThanOrEqual(1);
    expect(await notReloaded(page)).toBe(true);
    await page.context().close();
  });

  it('a newest turn deleted by another client goes, and the turn numbered again in its place shows', {
    timeout: 90_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'trimmed' });
    for (const input of ['one', 'two']) await call('POST', '/v1/sessions/trimmed/turns', { input });
    const page = await open('#/s/trimmed');
    const second = page.locator('#timeline details.turn[data-turn="2"]');
    await second.waitFor();
    await call('DELETE', '/v1/sessions/trimmed/turns/2');
    await second.waitFor({ state: 'detached', timeout: 30_000 });
    expect(await page.locator('#timeline details.turn').count()).toBe(1);
    expect(await page.locator('#strip-chart rect.bar-total').count()).toBe(1);
    await call('POST', '/v1/sessions/trimmed/turns', { input: 'two again' });
    await second.waitFor({ timeout: 30_000 });
    await second.locator('summary').click();
    await expect
      .poll(() => second.locator('.turn-output li pre').first().textContent())
      .toBe('assistant: echo: two again');
    expect(await notReloaded(page)).toBe(true);
    await page.context().close();
  });

  it('a poll under way when another session opens draws nothing into it', { timeout: 90_000 }, async () => {
    for (const id of ['left', 'opened']) {
      await call('POST', '/v1/sessions', { id });
      await call('POST', `/v1/sessions/${id}/turns`, { input: 'one' });
    }
    const page = await open('#/s/left');
    await page.locator('#timeline details.turn[data-turn="1"]').waitFor();
    // The poll's read of the newest turns (not the first page's 30) is held until the other session shows.
    const { asked, release } = await hold(
      page,
      (url) => url.pathname === '/v1/sessions/left/turns' && url.searchParams.get('limit') !== '30',
    );
    await call('POST', '/v1/sessions/left/turns', { input: 'two' });
    await asked;
    await page.evaluate(() => (location.hash = '#/s/opened'));
    await page.locator('#session-title', { hasText: 'Session opened' }).waitFor();
    await page.locator('#timeline details.turn[data-turn="1"]').waitFor();
    release();
    // The next poll of the open session has run: the held answer, had it come, came before.
    await page.waitForResponse((response) => new URL(response.url()).pathname === '/v1/sessions/opened', {
      timeout: 30_000,
    });
    expect(await page.locator('#timeline details.turn').count()).toBe(1);
    expect(await page.locator('#live-state').isHidden()).toBe(true);
    await page.context().close();
  });

  it('a followed turn that ended while the API was out of reach shows ended once it is back', {
    timeout: 90_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'dropped', model: 'openai-compatible:fake' });
    await call('POST', '/v1/sessions/dropped/turns', { input: 'hold on', background: true });
    const page = await open('#/s/dropped');
    const row = page.locator('#timeline details.turn[data-turn="1"]');
    await expect.poll(() => page.locator('#timeline .live-text').textContent(), { timeout: 30_000 }).toBe('Hello');
    // The network drops; the turn ends meanwhile, and the follower's read of it fails.
    const failed = page.waitForEvent('requestfailed', {
      predicate: (request) => new URL(request.url()).pathname === '/v1/sessions/dropped/turns/1',
      timeout: 30_000,
    });
    await page.context().setOffline(true);
    release();
    await expect
      .poll(async () => (await call('GET', '/v1/sessions/dropped/turns/1')).status, { timeout: 30_000 })
      .toBe('completed');
    await failed;
    await page.context().setOffline(false);
    await expect.poll(() => row.getAttribute('class'), { timeout: 60_000 }).toContain('status-completed');
    expect(await page.locator('#timeline .live').count()).toBe(0);
    expect(await notReloaded(page)).toBe(true);
    await page.context().close();
  });

  it('the session list shows a new session on top, and another session’s new totals', { timeout: 90_000 }, async () => {
    await call('POST', '/v1/sessions', { id: 'listed' });
    const page = await open('#/');
    const listed = page.locator('tr[data-id="listed"]');
    await listed.waitFor();
    expect(await listed.locator('td').nth(2).textContent()).toBe('0');
    await call('POST', '/v1/sessions', { id: 'created-later' });
    const created = page.locator('tr[data-id="created-later"]');
    await created.waitFor({ timeout: 30_000 });
    expect(await page.locator('#session-table tbody tr').first().getAttribute('data-id')).toBe('created-later');
    await call('POST', '/v1/sessions/listed/turns', { input: 'hello' });
    await expect.poll(() => listed.locator('td').nth(2).textContent(), { timeout: 30_000 }).toBe('1');
    expect(await page.locator('tr[data-id="created-later"]').count()).toBe(1);
    expect(await notReloaded(page)).toBe(true);
    await page.context().close();
  });

  it('the session list shows every session when more came between two polls than a page holds', {
    timeout: 90_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'before-many' });
    const page = await open('#/');
    await page.locator('tr[data-id="before-many"]').waitFor();
    // The next poll's listing is held until 31 sessions (a page and one) were created.
    const { asked, release } = await hold(
      page,
      (url) => url.pathname === '/v1/sessions' && !url.searchParams.has('after'),
      1,
    );
    await asked;
    for (let index = 0; index < 31; index++) await call('POST', '/v1/sessions', { id: `many-${index}` });
    release();
    await page.locator('tr[data-id="many-30"]').waitFor({ timeout: 30_000 });
    const listed = (await call('GET', '/v1/sessions?limit=100')).sessions.map((session: any) => session.id);
    const shown = () =>
      page.locator('#session-table tbody tr').evaluateAll((rows) => rows.map((row) => row.dataset.id));
    // Scrolled to its end: each session once, in the index's order, and the count says so.
    await expect
      .poll(
        async () => {
          await page.locator('#list-more').scrollIntoViewIfNeeded();
          return shown();
        },
        { timeout: 30_000 },
      )
      .toEqual(listed);
    expect(await page.locator('#list-more').textContent()).toBe(`${listed.length} sessions`);
    await page.context().close();
  });

  it('a poll answered 401 asks for the token, and the view comes back with what happened meanwhile', {
    timeout: 90_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'refused' });
    await call('POST', '/v1/sessions/refused/turns', { input: 'first' });
    const page = await open('#/s/refused');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    // The next read of the session (a poll) is refused, as once the token is revoked.
    await page.route(
      (url) => url.pathname === '/v1/sessions/refused',
      (route) =>
        route.fulfill({ status: 401, contentType: 'application/json', body: '{"error":{"code":"unauthorized"}}' }),
      { times: 1 },
    );
    await page.getByLabel('Bearer token').waitFor({ timeout: 30_000 });
    expect(await page.locator('#token-error').textContent()).toBe(
      'The API refused this token (401): check it and enter it again.',
    );
    await call('POST', '/v1/sessions/refused/turns', { input: 'second' });
    await page.getByLabel('Bearer token').fill(TOKEN);
    await page.getByRole('button', { name: 'Use token' }).click();
    await page.locator('details.turn[data-turn="2"]').waitFor();
    // Polling again: a third turn shows without a reload.
    await call('POST', '/v1/sessions/refused/turns', { input: 'third' });
    await page.locator('details.turn[data-turn="3"]').waitFor({ timeout: 30_000 });
    expect(await notReloaded(page)).toBe(true);
    await page.context().close();
  });

  it('a poll the API never answers is given up and says so, and the next one shows what came', {
    timeout: 120_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'unanswered' });
    await call('POST', '/v1/sessions/unanswered/turns', { input: 'first' });
    const page = await open('#/s/unanswered');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    // The next read of the session (a poll) never reaches the API; meanwhile a turn comes.
    const { asked, release } = await hold(page, (url) => url.pathname === '/v1/sessions/unanswered', 1);
    await asked;
    await call('POST', '/v1/sessions/unanswered/turns', { input: 'second' });
    const state = page.locator('#live-state');
    await state.waitFor({ timeout: 60_000 });
    expect(await page.locator('#live-message').textContent()).toMatch(
      /^Live updates paused: the API did not answer within \d+ s\. Trying again in \d+ s\.$/,
    );
    await page.getByRole('button', { name: 'Retry now' }).click();
    await page.locator('details.turn[data-turn="2"]').waitFor({ timeout: 30_000 });
    await state.waitFor({ state: 'hidden' });
    expect(await notReloaded(page)).toBe(true);
    release();
    await page.context().close();
  });

  it('a poll that cannot reach the API says so, and recovers', { timeout: 90_000 }, async () => {
    await call('POST', '/v1/sessions', { id: 'offline' });
    await call('POST', '/v1/sessions/offline/turns', { input: 'first' });
    const page = await open('#/s/offline');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    await page.route(
      (url) => url.pathname === '/v1/sessions/offline',
      (route) => route.abort('internetdisconnected'),
    );
    const state = page.locator('#live-state');
    await state.waitFor({ timeout: 30_000 });
    expect(await page.locator('#live-message').textContent()).toMatch(
      /^Live updates paused: the API could not be reached\. Trying again in \d+ s\.$/,
    );
    // What was shown stays.
    expect(await page.locator('details.turn[data-turn="1"]').isVisible()).toBe(true);
    await page.unrouteAll();
    await call('POST', '/v1/sessions/offline/turns', { input: 'second' });
    await page.getByRole('button', { name: 'Retry now' }).click();
    await page.locator('details.turn[data-turn="2"]').waitFor({ timeout: 30_000 });
    await state.waitFor({ state: 'hidden' });
    expect(await notReloaded(page)).toBe(true);
    await page.context().close();
  });
});
