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
 * The inspector on session states the scenario of inspector.test.ts does not reach, in Debian's
 * Chromium against the Node server (functions/node.ts, files in a temporary DATA_DIR): a turn of
 * more than one page of input, a chat turn on a long timeline, one sent twice, one refused, one
 * whose request failed and one left running for another session, a turn that failed to load, a
 * notice refused, an inbox and a fork list of more than a page, a session whose newest turn was
 * deleted, and scoped tokens: bound to one session with `session:read` alone, with
 * `session:turn` and `inbox:write`, unbound without `admin`, and a token changed in the tab.
 */
const TOKEN = 'ui-states-token';
let node: InspectorNode;

beforeAll(async () => {
  node = await startInspectorNode({
    API_TOKEN: TOKEN,
    TOKEN_SIGNING_KEY: 'q3Jv9nL2bXo8Zk1Ww4Tt7Ee0Rr6Yy5Uu3Ii9Oo2Pp1A=',
  });
}, INSPECTOR_HOOK_MS);

afterAll(() => node?.close());

const call = apiCaller(() => node.origin, TOKEN);

/** Session `id`, created with one turn of `input`. */
async function sessionWithTurn(id: string, input: string): Promise<void> {
  await call('POST', '/v1/sessions', { id });
  await call('POST', `/v1/sessions/${id}/turns`, { input });
}

/** The inspector at `hash`, in a tab of its own holding `token`. */
async function open(hash: string, token = TOKEN): Promise<Page> {
  const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
  await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), token);
  const page = await context.newPage();
  await page.goto(`${node.origin}/ui${hash}`);
  return page;
}

describe('the inspector on session states', () => {
  it('an expanded turn shows every one of its 120 input items', { timeout: 60_000 }, async () => {
    await call('POST', '/v1/sessions', { id: 'many-inputs' });
    const input = Array.from({ length: 120 }, (_, index) => ({
      type: 'message',
      role: 'user',
      content: `line ${index + 1}`,
    }));
    await call('POST', '/v1/sessions/many-inputs/turns', { input });
    const page = await open('#/s/many-inputs');
    await page.locator('details.turn[data-turn="1"] summary').click();
    await page.locator('.turn-seen li.item').first().waitFor();
    const seqs = await page.locator('.turn-input li.item').evaluateAll((rows) => rows.map((row) => row.dataset.seq));
    expect(seqs).toEqual(Array.from({ length: 120 }, (_, index) => String(index + 1)));
    await page.context().close();
  });

  it('after the chat box takes a turn, the timeline lists every turn once', { timeout: 120_000 }, async () => {
    await call('POST', '/v1/sessions', { id: 'chat-paging' });
    for (let index = 1; index <= 40; index++)
      await call('POST', '/v1/sessions/chat-paging/turns', { input: `t${index}` });
    const page = await open('#/s/chat-paging');
    await page.locator('details.turn[data-turn="40"]').waitFor();
    await page.locator('#chat-input').fill('from the chat box');
    await page.locator('#chat-form button').first().click();
    await page.locator('details.turn[data-turn="41"]').waitFor();
    // Scrolled to the end until the sentinel says every turn is loaded.
    await expect
      .poll(
        async () => {
          await page.locator('#timeline-more').scrollIntoViewIfNeeded();
          return page.locator('#timeline-more').textContent();
        },
        { timeout: 30_000 },
      )
      .toMatch(/^\d+ turns$/);
    const turns = await page
      .locator('#timeline details.turn')
      .evaluateAll((rows) => rows.map((row) => Number(row.getAttribute('data-turn'))));
    expect(turns).toEqual(Array.from({ length: 41 }, (_, index) => 41 - index));
    await page.context().close();
  });

  it('Send pressed twice takes one turn, its answer shown whole', { timeout: 60_000 }, async () => {
    await sessionWithTurn('chat-twice', 'first');
    const page = await open('#/s/chat-twice');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    await page.locator('#chat-input').fill('twice');
    const send = page.getByRole('button', { name: 'Send (streamed)' });
    // The first turn's request held until both presses were made, as on a slow connection.
    const posts: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'POST') posts.push(new URL(request.url()).pathname);
    });
    let pressed!: () => void;
    const bothPressed = new Promise<void>((resolve) => (pressed = resolve));
    await page.route(
      (url) => url.pathname === '/v1/sessions/chat-twice/turns',
      async (route) => {
        await bothPressed;
        await route.continue();
      },
      { times: 1 },
    );
    await send.dblclick();
    pressed();
    await expect.poll(() => page.locator('#chat-output').textContent()).toContain('[turn 2 completed]');
    expect(await page.locator('#chat-output').textContent()).toBe('echo: twice\n[turn 2 completed]');
    await page.locator('details.turn[data-turn="2"]').waitFor();
    expect((await call('GET', '/v1/sessions/chat-twice')).counts.turns).toBe(2);
    expect(posts).toEqual(['/v1/sessions/chat-twice/turns']);
    // Once the turn ended, the box takes the next one.
    expect(await send.isEnabled()).toBe(true);
    await page.context().close();
  });

  it('a turn the API refuses leaves its input in the chat box, to send again', { timeout: 60_000 }, async () => {
    await call('POST', '/v1/sessions', { id: 'chat-refused', budget: { max_turns: 1 } });
    await call('POST', '/v1/sessions/chat-refused/turns', { input: 'first' });
    const page = await open('#/s/chat-refused');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    await page.locator('#chat-input').fill('keep me');
    await page.getByRole('button', { name: 'Send (streamed)' }).click();
    await expect.poll(() => page.locator('#chat-output').textContent()).toMatch(/^Refused: budget_exhausted /);
    expect(await page.locator('#chat-input').inputValue()).toBe('keep me');
    expect(await page.getByRole('button', { name: 'Send (streamed)' }).isEnabled()).toBe(true);
    await page.context().close();
  });

  it('a chat turn whose request fails says so in the chat box and keeps its input', { timeout: 60_000 }, async () => {
    await sessionWithTurn('chat-offline', 'first');
    const page = await open('#/s/chat-offline');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    await page.route(
      (url) => url.pathname === '/v1/sessions/chat-offline/turns',
      (route) => route.abort(),
      {
        times: 1,
      },
    );
    await page.locator('#chat-input').fill('not sent');
    await page.getByRole('button', { name: 'Send (streamed)' }).click();
    await expect
      .poll(() => page.locator('#chat-output').textContent())
      .toBe('[no answer: the API could not be reached (Failed to fetch); the timeline shows whether the turn ran]');
    expect(await page.locator('#chat-input').inputValue()).toBe('not sent');
    expect(await page.getByRole('button', { name: 'Send (streamed)' }).isEnabled()).toBe(true);
    await page.context().close();
  });

  it('a chat turn still running when another session opens writes nothing into that view', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurn('chat-left', 'first');
    await sessionWithTurn('chat-next', 'first');
    const page = await open('#/s/chat-left');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    // Every text the chat box shows from here on.
    await page.evaluate(() => {
      const box = document.getElementById('chat-output')!;
      (window as any).chatTexts = [];
      new MutationObserver(() => (window as any).chatTexts.push(box.textContent)).observe(box, {
        childList: true,
        characterData: true,
        subtree: true,
      });
    });
    // The turn's request held until the other session is open.
    let asked!: () => void;
    const held = new Promise<void>((resolve) => (asked = resolve));
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    await page.route(
      (url) => url.pathname === '/v1/sessions/chat-left/turns',
      async (route) => {
        asked();
        await released;
        await route.continue();
      },
      { times: 1 },
    );
    await page.locator('#chat-input').fill('left behind');
    await page.getByRole('button', { name: 'Send (streamed)' }).click();
    await held;
    await page.evaluate(() => (location.hash = '#/s/chat-next'));
    await page.locator('details.turn[data-turn="1"]').waitFor();
    expect(await page.locator('#session-title').textContent()).toBe('Session chat-next');
    // The other session's chat box takes its own turns meanwhile.
    const send = page.getByRole('button', { name: 'Send (streamed)' });
    expect(await send.isEnabled()).toBe(true);
    const answered = page.waitForResponse((response) => response.url().endsWith('/v1/sessions/chat-left/turns'));
    release();
    await (await answered).finished();
    await page.locator('#chat-input').fill('mine');
    await send.click();
    await expect.poll(() => page.locator('#chat-output').textContent()).toBe('echo: mine\n[turn 2 completed]');
    expect((await call('GET', '/v1/sessions/chat-left')).counts.turns).toBe(2);
    const texts: string[] = await page.evaluate(() => (window as any).chatTexts);
    expect(texts.filter((text) => text.includes('left behind'))).toEqual([]);
    await page.context().close();
  });

  it('a turn that failed to load when expanded says so in its row, and loads when opened again', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurn('expand-retry', 'hello');
    const page = await open('#/s/expand-retry');
    const turn = page.locator('details.turn[data-turn="1"]');
    await turn.waitFor();
    // The turn's receipt cannot be read once (the network down).
    await page.route(
      (url) => url.pathname === '/v1/sessions/expand-retry/turns/1',
      (route) => route.abort(),
      {
        times: 1,
      },
    );
    await turn.locator('summary').click();
    await expect
      .poll(() => turn.locator('.turn-error').textContent())
      .toBe('This turn could not be loaded (Failed to fetch): close it and open it again to try again.');
    await turn.locator('summary').click();
    await turn.locator('summary').click();
    await expect.poll(() => turn.locator('.turn-input li pre').first().textContent()).toBe('user: hello');
    expect(await turn.locator('.turn-error').count()).toBe(0);
    expect(await turn.locator('.turn-body').count()).toBe(1);
    await page.context().close();
  });

  it('a notice the API refuses says why beside the inbox forms, and keeps what was typed', {
    timeout: 60_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'notice-refused', strategies: ['inbox'] });
    const page = await open('#/s/notice-refused');
    await page.locator('#timeline-more').filter({ hasText: '0 turns' }).waitFor();
    await page.getByLabel('Name', { exact: true }).fill('../bad');
    await page.getByLabel('Notice', { exact: true }).fill('kept');
    await page.getByRole('button', { name: 'Post notice' }).click();
    const said = page.locator('#inbox-status');
    await expect.poll(() => said.textContent()).toMatch(/^Notice refused: body\.name: must be /);
    expect(await page.getByLabel('Notice', { exact: true }).inputValue()).toBe('kept');
    // Posted once the name is right: the line says so.
    await page.getByLabel('Name', { exact: true }).fill('0001-good.md');
    await page.getByRole('button', { name: 'Post notice' }).click();
    await expect.poll(() => said.textContent()).toBe('Notice 0001-good.md posted.');
    await expect.poll(() => page.locator('#inbox-pending').textContent()).toContain('0001-good.md');
    await page.getByRole('button', { name: 'Abort next turn' }).click();
    await expect.poll(() => said.textContent()).toBe('Abort posted: the next turn stops before calling the model.');
    expect(await axeViolations(page)).toEqual([]);
    await page.context().close();
  });

  it('an inbox of more notices and delivery records than a page holds shows them all, a page at a time', {
    timeout: 120_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'full-inbox', strategies: ['inbox'] });
    const post = async (prefix: string, count: number) => {
      const names = Array.from({ length: count }, (_, index) => `${prefix}-${String(index + 1).padStart(3, '0')}.md`);
      for (const name of names) await call('POST', '/v1/sessions/full-inbox/inbox', { name, content: name });
      return names;
    };
    // Two turns deliver 63 notices (a turn takes at most 32), then 61 more stay pending.
    const delivered = await post('d', 63);
    await call('POST', '/v1/sessions/full-inbox/turns', { input: 'one' });
    await call('POST', '/v1/sessions/full-inbox/turns', { input: 'two' });
    const pending = await post('p', 61);
    expect((await call('GET', '/v1/sessions/full-inbox/inbox/delivered?limit=100')).delivered).toHaveLength(63);
    const page = await open('#/s/full-inbox');
    // Under the page's own Content-Security-Policy: a violation would be a console error.
    const consoleErrors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    const names = (list: string) =>
      page.locator(`#${list} li`).evaluateAll((rows) => rows.map((row) => row.textContent!.split(' ')[0]));
    for (const [list, label, all] of [
      ['inbox-pending', 'More pending notices', pending],
      ['inbox-delivered', 'More delivered notices', delivered],
    ] as const) {
      await expect.poll(() => page.locator(`#${list} li`).count()).toBe(50);
      expect(await axeViolations(page)).toEqual([]);
      await page.getByRole('button', { name: label }).click();
      await expect.poll(() => names(list)).toEqual(all);
      expect(await page.getByRole('button', { name: label }).count()).toBe(0);
    }
    expect(await page.locator('#status').textContent()).toBe('');
    expect(consoleErrors).toEqual([]);
    await page.context().close();
  });

  it('a session of more forks than a page holds lists them all, a page at a time', { timeout: 120_000 }, async () => {
    await sessionWithTurn('many-forks', 'one');
    const forks = Array.from({ length: 51 }, (_, index) => `many-forks-${String(index + 1).padStart(2, '0')}`);
    for (const id of forks) await call('POST', '/v1/sessions/many-forks/fork', { at_turn: 1, id });
    const page = await open('#/s/many-forks');
    await expect.poll(() => page.locator('#session-forks li').count()).toBe(50);
    await page.getByRole('button', { name: 'More forks' }).click();
    await expect.poll(() => page.locator('#session-forks li').count()).toBe(51);
    const listed = await page
      .locator('#session-forks li a')
      .evaluateAll((links) => links.map((link) => link.textContent));
    expect(listed.toSorted()).toEqual(forks);
    expect(await page.getByRole('button', { name: 'More forks' }).count()).toBe(0);
    await page.context().close();
  });

  it('a session whose newest turn was deleted is not shown as a fork of itself', { timeout: 60_000 }, async () => {
    await call('POST', '/v1/sessions', { id: 'deleted-newest' });
    await call('POST', '/v1/sessions/deleted-newest/turns', { input: 'one' });
    await call('POST', '/v1/sessions/deleted-newest/turns', { input: 'two' });
    await call('DELETE', '/v1/sessions/deleted-newest/turns/2');
    expect((await call('GET', '/v1/sessions/deleted-newest')).forked_from).toBeUndefined();
    const page = await open('#/s/deleted-newest');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    await expect.poll(() => page.locator('#session-counts').textContent()).toContain('1 turn');
    expect(await page.locator('#session-lineage').textContent()).toBe('');
    await page.context().close();
  });

  it('a token bound to the session with session:read alone opens its view without an error', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurn('scoped-read', 'one');
    const minted = await call('POST', '/v1/tokens', { scopes: ['session:read'], session_id: 'scoped-read' });
    const page = await open('#/s/scoped-read', minted.token);
    // Chromium logs every 4xx fetch as a console error: the view asks only for what the token may read.
    const consoleErrors: string[] = [];
    page.on('console', (message) => {
      if (message.type() === 'error') consoleErrors.push(message.text());
    });
    page.on('pageerror', (error) => consoleErrors.push(error.message));
    await page.locator('details.turn[data-turn="1"]').waitFor();
    await expect.poll(() => page.locator('#inbox-pending').textContent()).toContain('cannot read the inbox');
    expect(await page.locator('#inbox-delivered').textContent()).toContain('cannot read the inbox');
    expect(await page.locator('#status').textContent()).toBe('');
    await page.locator('details.turn[data-turn="1"] summary').click();
    await page.locator('.turn-seen li.item').first().waitFor();
    expect(consoleErrors).toEqual([]);
    await page.context().close();
  });

  /**
   * The actions `page`'s session view shows once turn 1 is expanded: the chat box, the notice and
   * abort forms, Save (or the note that the token cannot save), "Fork here"; with the status
   * line. The tab is closed after.
   */
  async function offered(page: Page): Promise<Record<string, boolean | string | null>> {
    await page.locator('details.turn[data-turn="1"] summary').click();
    await page.locator('.turn-seen li.item').first().waitFor();
    const shown: Record<string, boolean | string | null> = {};
    for (const id of ['chat-section', 'notice-form', 'abort-form', 'config-save', 'config-readonly'])
      shown[id] = await page.locator(`#${id}`).isVisible();
    shown['fork-here'] = (await page.locator('.fork-here').count()) > 0;
    shown.status = await page.locator('#status').textContent();
    await page.context().close();
    return shown;
  }

  it('a token bound to a session starts at it and is offered only the actions its scopes allow', {
    timeout: 90_000,
  }, async () => {
    await sessionWithTurn('scoped-actions', 'one');
    const reader = await call('POST', '/v1/tokens', { scopes: ['session:read'], session_id: 'scoped-actions' });
    const page = await open('#/', reader.token);
    // It could list no other session: the list is not shown, its session is.
    await page.waitForURL(/#\/s\/scoped-actions$/);
    const none = {
      'chat-section': false,
      'notice-form': false,
      'abort-form': false,
      'config-save': false,
      'config-readonly': true,
    };
    expect(await offered(page)).toEqual({ ...none, 'fork-here': false, status: '' });
    const scopes = ['session:turn', 'inbox:write'];
    const turner = await call('POST', '/v1/tokens', { scopes, session_id: 'scoped-actions' });
    expect(await offered(await open('#/s/scoped-actions', turner.token))).toEqual({
      ...none,
      'chat-section': true,
      'notice-form': true,
      'abort-form': true,
      'fork-here': false,
      status: '',
    });
    // A bound admin may do everything on its session but fork it: the fork is another session.
    const owner = await call('POST', '/v1/tokens', { scopes: ['admin'], session_id: 'scoped-actions' });
    expect(await offered(await open('#/s/scoped-actions', owner.token))).toEqual({
      'chat-section': true,
      'notice-form': true,
      'abort-form': true,
      'config-save': true,
      'config-readonly': false,
      'fork-here': false,
      status: '',
    });

    // Unbound without admin: no list, and no "New session", but a session opens by its id.
    const unbound = await call('POST', '/v1/tokens', { scopes: ['session:read'] });
    const third = await open('#/', unbound.token);
    await expect.poll(() => third.locator('#list-more').textContent()).toContain('cannot list sessions');
    expect(await third.locator('#new-session').isVisible()).toBe(false);
    expect(await third.locator('#status').textContent()).toBe('');
    await third.context().close();
  });

  it('a token that may not save the config is told so beside it, and Enter in the form saves nothing', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurn('scoped-config', 'one');
    await call('PATCH', '/v1/sessions/scoped-config', { strategy_config: { max_tool_calls: 5 } });
    const reader = await call('POST', '/v1/tokens', { scopes: ['session:read'], session_id: 'scoped-config' });
    const page = await open('#/s/scoped-config', reader.token);
    await expect.poll(() => page.locator('#threshold-max_tool_calls').inputValue()).toBe('5');
    expect(await page.locator('#config-save').isVisible()).toBe(false);
    const note = page.locator('#config-readonly');
    expect(await note.isVisible()).toBe(true);
    expect(await note.textContent()).toContain('cannot save');
    expect(await page.locator('#config-strategies').getAttribute('aria-describedby')).toBe('config-readonly');
    // Enter in a field asks for the preview of what was typed, and writes nothing.
    const asked = page.waitForRequest(
      (request) => request.method() === 'PATCH' || new URL(request.url()).searchParams.get('strategies') === 'none',
    );
    await page.locator('#config-strategies').fill('none');
    await page.locator('#config-strategies').press('Enter');
    expect((await asked).method()).toBe('GET');
    expect(await page.locator('#config-status').textContent()).not.toContain('Not saved');
    expect((await call('GET', '/v1/sessions/scoped-config')).strategies ?? null).toBeNull();
    await page.context().close();
  });

  it('a session the new token of the tab may not read shows why, and nothing the previous token read', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurn('admin-only', 'for admin eyes');
    await call('POST', '/v1/sessions', { id: 'elsewhere' });
    const bound = await call('POST', '/v1/tokens', { scopes: ['session:read'], session_id: 'elsewhere' });
    const page = await open('#/s/admin-only');
    await page.locator('details.turn[data-turn="1"]').waitFor();
    await page.locator('#sign-out').click();
    await page.getByLabel('Bearer token').fill(bound.token);
    await page.getByRole('button', { name: 'Use token' }).click();
    await expect.poll(() => page.locator('#status').textContent()).toContain('bound to session elsewhere');
    expect(await page.locator('#session-view').isVisible()).toBe(true);
    expect(await page.locator('#timeline details.turn').count()).toBe(0);
    expect(await page.locator('#session-body').isVisible()).toBe(false);
    await page.context().close();
  });
});
