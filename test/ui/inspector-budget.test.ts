import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { costText } from '../../functions/ui/client/format.ts';
import { type FakeProvider, startFakeProvider } from '../support/fake-providers/fake-provider-server.ts';
import {
  apiCaller,
  chunk,
  INSPECTOR_HOOK_MS,
  type InspectorNode,
  startInspectorNode,
} from '../support/inspector-node.ts';

/**
 * What sessions cost and how a runaway one is stopped, in Debian's Chromium against the Node
 * server: the list's cost column, a session's budget against its usage with its Stop and Lift
 * buttons, and the Withdraw button of a queued input.
 */
const TOKEN = 'ui-budget-token';
let node: InspectorNode;
let provider: FakeProvider;

beforeAll(async () => {
  // The fake model starts its answer and holds its stream open until the turn is cancelled.
  provider = await startFakeProvider(() => ({ sse: chunk('Hello'), hang: true }));
  node = await startInspectorNode({
    API_TOKEN: TOKEN,
    TOKEN_SIGNING_KEY: 'q3Jv9nL2bXo8Zk1Ww4Tt7Ee0Rr6Yy5Uu3Ii9Oo2Pp1A=',
    OPENAI_COMPATIBLE_BASE_URL: provider.baseURL,
    // Echo priced, so turns cost something.
    MODEL_PRICES: JSON.stringify({ echo: { input: 1000, output: 2000 } }),
  });
}, INSPECTOR_HOOK_MS);

afterAll(async () => {
  await node?.close();
  await provider?.close();
});

const call = apiCaller(() => node.origin, TOKEN);

/** The inspector at `hash`, in a tab of its own holding `token`. */
async function open(hash: string, token = TOKEN): Promise<Page> {
  const context = await node.browser.newContext({ viewport: { width: 1400, height: 1000 } });
  await context.addInitScript((value) => sessionStorage.setItem('tailgate.token', value), token);
  const page = await context.newPage();
  await page.goto(`${node.origin}/ui${hash}`);
  return page;
}

/** Session `id` (with `fields`) with `turns` turns taken. */
async function sessionWithTurns(id: string, turns: number, fields: object = {}): Promise<void> {
  await call('POST', '/v1/sessions', { id, ...fields });
  for (let index = 1; index <= turns; index++) await call('POST', `/v1/sessions/${id}/turns`, { input: `t${index}` });
}

describe("the inspector's costs and budgets", () => {
  it('the session list shows what each session cost', { timeout: 60_000 }, async () => {
    await sessionWithTurns('cost-two', 2);
    await sessionWithTurns('cost-none', 0);
    const listed = (await call('GET', '/v1/sessions?limit=100')).sessions;
    const usage = (id: string) => listed.find((session: any) => session.id === id).usage;
    expect(usage('cost-two').cost_usd).toBeGreaterThan(0);
    const page = await open('');
    const cell = (id: string) => page.locator(`#session-table tr[data-id="${id}"] td.cost`);
    await expect.poll(() => cell('cost-two').textContent()).toBe(costText(usage('cost-two').cost_usd));
    expect(await cell('cost-none').textContent()).toBe('$0.00');
    expect(await page.locator('#session-table th', { hasText: 'Cost' }).count()).toBe(1);
    await page.context().close();
  });

  it("a session's page shows its budget against its usage, stops it on confirm, and lifts the stop", {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('runaway', 2, { budget: { max_turns: 50, max_cost_usd: 1 } });
    const usage = (await call('GET', '/v1/sessions/runaway')).usage;
    const page = await open('#/s/runaway');
    const line = page.locator('#session-budget');
    await expect
      .poll(() => line.textContent())
      .toBe(`Budget: turns 2 / 50 · ${costText(usage.priced_cost_usd)} / $1.00`);
    await page.getByRole('button', { name: 'Stop session' }).click();
    // Nothing changes before the confirm.
    expect((await call('GET', '/v1/sessions/runaway')).budget).toEqual({ max_turns: 50, max_cost_usd: 1 });
    await page.getByRole('button', { name: 'Keep running' }).click();
    expect(await page.getByRole('button', { name: 'Confirm stop' }).count()).toBe(0);
    await page.getByRole('button', { name: 'Stop session' }).click();
    await page.getByRole('button', { name: 'Confirm stop' }).click();
    await expect
      .poll(() => line.textContent())
      .toBe(
        `Budget: turns 2 / 0 · ${costText(usage.priced_cost_usd)} / $1.00 · ` +
          'stopped: the next turn is refused, queued inputs wait',
      );
    expect((await call('GET', '/v1/sessions/runaway')).budget).toEqual({ max_turns: 0, max_cost_usd: 1 });
    await expect(call('POST', '/v1/sessions/runaway/turns', { input: 'more' })).rejects.toThrow(/402/);
    expect(await page.getByRole('button', { name: 'Stop session' }).count()).toBe(0);
    // The stop lifted: the budget it replaced, as this page read it.
    await page.getByRole('button', { name: 'Lift stop' }).click();
    await expect
      .poll(() => line.textContent())
      .toBe(`Budget: turns 2 / 50 · ${costText(usage.priced_cost_usd)} / $1.00`);
    expect((await call('GET', '/v1/sessions/runaway')).budget).toEqual({ max_turns: 50, max_cost_usd: 1 });
    // A budget another client sets shows with the next live update.
    await call('PATCH', '/v1/sessions/runaway', { budget: { max_turns: 3 } });
    await expect.poll(() => line.textContent(), { timeout: 15_000 }).toBe('Budget: turns 2 / 3');
    await page.context().close();
  });

  it('the stop and its lift are worked from the keyboard: each step focuses the button that follows', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('keyed', 1, { budget: { max_turns: 40 } });
    const page = await open('#/s/keyed');
    const focused = () => page.evaluate(() => document.activeElement?.textContent ?? null);
    await page.getByRole('button', { name: 'Stop session' }).focus();
    await page.keyboard.press('Enter');
    await expect.poll(focused).toBe('Confirm stop');
    await page.keyboard.press('Tab');
    expect(await focused()).toBe('Keep running');
    await page.keyboard.press('Enter');
    await expect.poll(focused).toBe('Stop session');
    await page.keyboard.press('Enter');
    await expect.poll(focused).toBe('Confirm stop');
    await page.keyboard.press('Enter');
    await expect.poll(async () => (await call('GET', '/v1/sessions/keyed')).budget).toEqual({ max_turns: 0 });
    await expect.poll(focused).toBe('Lift stop');
    await page.keyboard.press('Enter');
    await expect.poll(async () => (await call('GET', '/v1/sessions/keyed')).budget).toEqual({ max_turns: 40 });
    await expect.poll(focused).toBe('Stop session');
    await page.context().close();
  });

  it('a lifted stop keeps the limits another client set while it stood, and restores the turn limit', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('raised', 1, { budget: { max_turns: 50, max_cost_usd: 1 } });
    const page = await open('#/s/raised');
    const line = page.locator('#session-budget');
    await page.getByRole('button', { name: 'Stop session' }).click();
    await page.getByRole('button', { name: 'Confirm stop' }).click();
    await expect
      .poll(async () => (await call('GET', '/v1/sessions/raised')).budget)
      .toEqual({
        max_turns: 0,
        max_cost_usd: 1,
      });
    // Another client raises the cost limit while the stop stands; the page shows it.
    await call('PATCH', '/v1/sessions/raised', { budget: { max_turns: 0, max_cost_usd: 5 } });
    await expect.poll(() => line.textContent(), { timeout: 15_000 }).toContain('/ $5.00');
    await page.getByRole('button', { name: 'Lift stop' }).click();
    await expect.poll(async () => (await call('GET', '/v1/sessions/raised')).budget).not.toHaveProperty('max_turns', 0);
    expect((await call('GET', '/v1/sessions/raised')).budget).toEqual({ max_turns: 50, max_cost_usd: 5 });
    await page.context().close();
  });

  it('a stop lifted after the page is reloaded restores the turn limit the stop replaced', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('reloaded', 1, { budget: { max_turns: 40, max_cost_usd: 1 } });
    const page = await open('#/s/reloaded');
    await page.getByRole('button', { name: 'Stop session' }).click();
    await page.getByRole('button', { name: 'Confirm stop' }).click();
    // The page shows the stop once its PATCH is answered, and keeps what it replaced then.
    await expect.poll(() => page.locator('#session-budget').textContent()).toContain('stopped');
    expect((await call('GET', '/v1/sessions/reloaded')).budget).toEqual({ max_turns: 0, max_cost_usd: 1 });
    await page.reload();
    // Known, the turn limit is restored with no question asked.
    await page.getByRole('button', { name: 'Lift stop' }).click();
    await expect
      .poll(async () => (await call('GET', '/v1/sessions/reloaded')).budget)
      .toEqual({ max_turns: 40, max_cost_usd: 1 });
    await expect.poll(() => page.locator('#session-budget').textContent()).toMatch(/^Budget: turns 1 \/ 40 · /);
    await page.context().close();
  });

  it('a stop kept for a session deleted since is not restored on a new session of that id', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('reused', 1, { budget: { max_turns: 40 } });
    const page = await open('#/s/reused');
    await page.getByRole('button', { name: 'Stop session' }).click();
    await page.getByRole('button', { name: 'Confirm stop' }).click();
    await expect.poll(() => page.locator('#session-budget').textContent()).toContain('stopped');
    // The session is deleted and made again under its id, created stopped by its client.
    await call('DELETE', '/v1/sessions/reused');
    await call('POST', '/v1/sessions', { id: 'reused', budget: { max_turns: 0, max_cost_usd: 1 } });
    await page.reload();
    await page.getByRole('button', { name: 'Lift stop' }).click();
    // The turn limit kept is the deleted session's: this one's is not known.
    const actions = page.locator('#session-budget-box .row');
    await expect.poll(() => actions.textContent()).toContain('lifting it removes the turn limit');
    expect((await call('GET', '/v1/sessions/reused')).budget).toEqual({ max_turns: 0, max_cost_usd: 1 });
    await page.context().close();
  });

  it('a stop kept here is not restored once the session ran turns after it (lifted and stopped again elsewhere)', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('restopped', 1, { budget: { max_turns: 40 } });
    const page = await open('#/s/restopped');
    await page.getByRole('button', { name: 'Stop session' }).click();
    await page.getByRole('button', { name: 'Confirm stop' }).click();
    await expect.poll(() => page.locator('#session-budget').textContent()).toContain('stopped');
    // Away from the session's page, another client lifts the stop, a turn runs, and it stops it again.
    await page.goto(`${node.origin}/ui#/`);
    await call('PATCH', '/v1/sessions/restopped', { budget: { max_turns: 100 } });
    await call('POST', '/v1/sessions/restopped/turns', { input: 'more' });
    await call('PATCH', '/v1/sessions/restopped', { budget: { max_turns: 0 } });
    await page.goto(`${node.origin}/ui#/s/restopped`);
    await page.getByRole('button', { name: 'Lift stop' }).click();
    // What this browser kept is the first stop's: the one standing replaced another limit.
    const actions = page.locator('#session-budget-box .row');
    await expect.poll(() => actions.textContent()).toContain('lifting it removes the turn limit');
    expect((await call('GET', '/v1/sessions/restopped')).budget).toEqual({ max_turns: 0 });
    await page.context().close();
  });

  it('a stop this browser did not make says, before lifting it, that the turn limit goes', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('elsewhere', 1, { budget: { max_turns: 40, max_cost_usd: 1 } });
    // Stopped in another browser.
    const other = await open('#/s/elsewhere');
    await other.getByRole('button', { name: 'Stop session' }).click();
    await other.getByRole('button', { name: 'Confirm stop' }).click();
    await expect
      .poll(async () => (await call('GET', '/v1/sessions/elsewhere')).budget)
      .toEqual({ max_turns: 0, max_cost_usd: 1 });
    await other.context().close();
    const page = await open('#/s/elsewhere');
    const actions = page.locator('#session-budget-box .row');
    // A stored entry is read only as the shape a stop stores: one that is not JSON, or another
    // shape, is as none.
    for (const kept of ['{"max_turns": 40', '{"max_turns": "40"}']) {
      await page.evaluate((value) => localStorage.setItem('tailgate.stopped.elsewhere', value), kept);
      await page.reload();
      await page.getByRole('button', { name: 'Lift stop' }).click();
      expect(await actions.textContent()).toContain('lifting it removes the turn limit');
      await page.getByRole('button', { name: 'Keep stopped' }).click();
      expect(await page.getByRole('button', { name: 'Lift stop' }).count()).toBe(1);
    }
    expect((await call('GET', '/v1/sessions/elsewhere')).budget).toEqual({ max_turns: 0, max_cost_usd: 1 });
    await page.getByRole('button', { name: 'Lift stop' }).click();
    await page.getByRole('button', { name: 'Lift, no turn limit' }).click();
    await expect.poll(async () => (await call('GET', '/v1/sessions/elsewhere')).budget).toEqual({ max_cost_usd: 1 });
    await page.context().close();
  });

  it('a stop the API refuses (403) says that it needs admin; a token without admin is not offered it', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('guarded', 1);
    const page = await open('#/s/guarded');
    await expect.poll(() => page.locator('#session-budget').textContent()).toBe('No budget.');
    await page.route(
      (url) => url.pathname === '/v1/sessions/guarded',
      (route) =>
        route.request().method() === 'PATCH'
          ? route.fulfill({
              status: 403,
              contentType: 'application/json',
              body: JSON.stringify({ error: { code: 'forbidden', message: 'token lacks scope admin' } }),
            })
          : route.continue(),
    );
    await page.getByRole('button', { name: 'Stop session' }).click();
    await page.getByRole('button', { name: 'Confirm stop' }).click();
    await expect
      .poll(() => page.locator('#budget-status').textContent())
      .toBe('This token may not change the budget (that needs admin): token lacks scope admin');
    expect((await call('GET', '/v1/sessions/guarded')).budget).toBeNull();
    await page.context().close();
    const reader = await call('POST', '/v1/tokens', { scopes: ['session:read'], session_id: 'guarded' });
    const readerPage = await open('#/s/guarded', reader.token);
    await expect.poll(() => readerPage.locator('#session-budget').textContent()).toBe('No budget.');
    expect(await readerPage.getByRole('button', { name: 'Stop session' }).count()).toBe(0);
    await readerPage.context().close();
  });

  it('a queue the spent budget holds says so, and runs once the budget is raised', { timeout: 60_000 }, async () => {
    await sessionWithTurns('held', 2, { on_busy: 'enqueue', budget: { max_turns: 50 } });
    // A turn on the fake model runs on, and an input queues behind it.
    const running = await call('POST', '/v1/sessions/held/turns', {
      input: 'hold on',
      model: 'openai-compatible:fake',
      background: true,
    });
    const queued = await call('POST', '/v1/sessions/held/turns', { input: 'after the budget' });
    // Another client lowers the budget to what the session spent, then the running turn ends.
    await call('PATCH', '/v1/sessions/held', { budget: { max_turns: 2 } });
    await call('POST', `/v1/sessions/held/turns/${running.turn}/cancel`);
    const listing = await call('GET', '/v1/sessions/held/queue');
    expect(listing.total).toBe(1);
    expect(listing.held).toMatchObject({ reason: 'budget_exhausted', limit: 'max_turns', value: 2 });
    const page = await open('#/s/held');
    const held = page.locator('#queue-held');
    await expect.poll(() => held.count()).toBe(1);
    await expect
      .poll(() => held.textContent())
      .toBe(
        `Held: the session's budget is spent (turns ${listing.held.spent} / 2); ` +
          'raise or lift it to run these inputs',
      );
    expect(await page.locator(`#queue-list li[data-queued-turn="${queued.queued_turn}"]`).count()).toBe(1);
    // Raised, the input runs: the queue empties and no longer reads held.
    await call('PATCH', '/v1/sessions/held', { budget: { max_turns: listing.held.spent + 1 } });
    await expect.poll(() => page.locator('#queue-empty').textContent(), { timeout: 15_000 }).toBe('Nothing queued.');
    expect(await held.textContent()).toBe('');
    await page.context().close();
  });

  it('the queued inputs show above the turns, which a long history pages in below', { timeout: 60_000 }, async () => {
    await sessionWithTurns('waiting', 3, { on_busy: 'enqueue' });
    const running = await call('POST', '/v1/sessions/waiting/turns', {
      input: 'hold on',
      model: 'openai-compatible:fake',
      background: true,
    });
    const queued = await call('POST', '/v1/sessions/waiting/turns', { input: 'next please' });
    const page = await open('#/s/waiting');
    const row = page.locator(`#queue-list li[data-queued-turn="${queued.queued_turn}"]`);
    await expect.poll(() => row.count()).toBe(1);
    const top = async (selector: string) => (await page.locator(selector).boundingBox())?.y ?? Number.NaN;
    expect(await top('#queue-section')).toBeLessThan(await top('#timeline'));
    await call('POST', `/v1/sessions/waiting/turns/${running.turn}/cancel`);
    await page.context().close();
  });

  it('a queue that shrinks above the reader leaves the rows the reader looks at where they were', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('shrinking', 12, { on_busy: 'enqueue' });
    const running = await call('POST', '/v1/sessions/shrinking/turns', {
      input: 'hold on',
      model: 'openai-compatible:fake',
      background: true,
    });
    const queued = [];
    for (const input of ['one', 'two', 'three'])
      queued.push(await call('POST', '/v1/sessions/shrinking/turns', { input }));
    const page = await open('#/s/shrinking');
    await page.setViewportSize({ width: 1400, height: 400 });
    await expect.poll(() => page.locator('#queue-list li').count()).toBe(3);
    await expect.poll(() => page.locator('#timeline .live-text').textContent()).toBe('Hello');
    // As in a browser without scroll anchoring (test/ui/inspector-live-updates.test.ts).
    await page.evaluate(() => (document.documentElement.style.overflowAnchor = 'none'));
    const row = page.locator('#timeline details.turn[data-turn="6"]');
    await row.evaluate((details) => details.scrollIntoView({ block: 'start' }));
    const top = () => row.evaluate((details) => details.getBoundingClientRect().top);
    const before = await top();
    expect(await page.locator('#timeline').evaluate((list) => list.getBoundingClientRect().top < 0)).toBe(true);
    for (const input of queued) await call('DELETE', `/v1/sessions/shrinking/queue/${input.queued_turn}`);
    await expect.poll(() => page.locator('#queue-empty').textContent(), { timeout: 15_000 }).toBe('Nothing queued.');
    expect(Math.abs((await top()) - before)).toBeLessThanOrEqual(1);
    await call('POST', `/v1/sessions/shrinking/turns/${running.turn}/cancel`);
    await page.context().close();
  });

  it('Withdraw and Cancel pressed from the keyboard hand the focus to what stands in their place', {
    timeout: 60_000,
  }, async () => {
    await call('POST', '/v1/sessions', { id: 'keyed-queue', model: 'openai-compatible:fake', on_busy: 'enqueue' });
    const running = await call('POST', '/v1/sessions/keyed-queue/turns', { input: 'hold on', background: true });
    const first = await call('POST', '/v1/sessions/keyed-queue/turns', { input: 'first' });
    const second = await call('POST', '/v1/sessions/keyed-queue/turns', { input: 'second' });
    const page = await open('#/s/keyed-queue');
    const focused = () =>
      page.evaluate(() => {
        const active = document.activeElement;
        const turn = active?.closest('details[data-turn]')?.getAttribute('data-turn');
        return active?.closest('li[data-queued-turn]')?.getAttribute('data-queued-turn') ?? turn ?? active?.id ?? null;
      });
    await page.locator(`#queue-list li[data-queued-turn="${first.queued_turn}"] button`).focus();
    await page.keyboard.press('Enter');
    await expect.poll(focused).toBe(second.queued_turn);
    await page.keyboard.press('Enter');
    await expect.poll(() => page.locator('#queue-empty').textContent()).toBe('Nothing queued.');
    expect(await focused()).toBe('queue-title');
    const live = page.locator('#timeline .live');
    await expect.poll(() => live.locator('.live-text').textContent()).toBe('Hello');
    await live.getByRole('button', { name: 'Cancel' }).focus();
    await page.keyboard.press('Enter');
    const row = page.locator(`#timeline details.turn[data-turn="${running.turn}"]`);
    await expect.poll(() => row.getAttribute('class')).toContain('status-cancelled');
    await expect.poll(focused).toBe(String(running.turn));
    await page.context().close();
  });

  it('the prompt chart tells a turn that stored no prompt, and a reuse the API does not know, from a 0', {
    timeout: 60_000,
  }, async () => {
    await sessionWithTurns('gap', 1);
    const running = await call('POST', '/v1/sessions/gap/turns', {
      input: 'hold on',
      model: 'openai-compatible:fake',
      background: true,
    });
    await expect
      .poll(async () => (await call('GET', `/v1/sessions/gap/turns/${running.turn}`)).status)
      .toBe('in_progress');
    await call('POST', `/v1/sessions/gap/turns/${running.turn}/cancel`);
    await call('POST', '/v1/sessions/gap/turns', { input: 'after the cancel' });
    const after = await call('GET', '/v1/sessions/gap/turns/3');
    expect(after.prefix_reused_chars).toBeNull();
    const page = await open('#/s/gap');
    const titles = page.locator('#strip-chart rect.bar-total title');
    await expect.poll(() => titles.count()).toBe(3);
    expect(await titles.nth(1).textContent()).toBe('turn 2: no prompt stored');
    expect(await titles.nth(2).textContent()).toBe(`turn 3: ${after.context.prompt_chars} chars, reuse not known`);
    await page.context().close();
  });

  it('a queued input is withdrawn from its row', { timeout: 60_000 }, async () => {
    await call('POST', '/v1/sessions', { id: 'queued', model: 'openai-compatible:fake', on_busy: 'enqueue' });
    const running = await call('POST', '/v1/sessions/queued/turns', { input: 'hold on', background: true });
    const queued = await call('POST', '/v1/sessions/queued/turns', { input: 'next please' });
    const page = await open('#/s/queued');
    const row = page.locator(`#queue-list li[data-queued-turn="${queued.queued_turn}"]`);
    await row.getByRole('button', { name: 'Withdraw' }).click();
    await expect.poll(() => page.locator('#queue-empty').textContent()).toBe('Nothing queued.');
    expect(await page.locator('#queue-list li').count()).toBe(0);
    expect((await call('GET', '/v1/sessions/queued/queue')).total).toBe(0);
    await call('POST', `/v1/sessions/queued/turns/${running.turn}/cancel`);
    await page.context().close();
  });
});
