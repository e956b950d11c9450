/**
 * A session's budget against what it spent, and the way to stop a runaway session: "Stop session"
 * (after a confirm) PATCHes `budget` with `max_turns: 0` and the other limits it had (a PATCH
 * replaces the whole object), so its next turn is refused and the inputs queued behind it wait;
 * the turn limit the stop replaced is kept in this browser's localStorage until the page sees the
 * session running again. "Lift stop" restores that turn limit, keeping the other limits as they
 * stand; where this browser does not hold it (stopped elsewhere, storage cleared, kept for a
 * session of that id deleted since, or before turns ran: lifted and stopped again elsewhere), it
 * first says that lifting removes the turn limit, and on confirm drops it. Both need `admin`: a
 * token without it is not offered them, a refusal is shown.
 */
import { api, sessionPath } from './api.ts';
import { $, el } from './dom.ts';
import { budgetCostText, countsText } from './format.ts';
import { may } from './token.ts';
import { ApiError, Unauthorized } from './view.ts';

type Budget = { max_cost_usd?: number; max_turns?: number; max_total_tokens?: number };

/** Where this browser keeps the turn limit a stop of session `id` replaced. */
const stoppedKey = (id: string) => `tailgate.stopped.${id}`;

/**
 * The turn limit a stop from this browser replaced (`{}`: none), or `undefined` when it holds
 * none that reads as one (never stored, cleared, not of that shape) for `session` as it stands:
 * kept with the session's `created_at` (not of a session of that id deleted since) and its
 * `counts.turns` as the stop left it (no turn can start while stopped: one did, the stop was
 * lifted and this stop made elsewhere).
 */
function replacedTurns(id: string, session: any): { max_turns?: number } | undefined {
  try {
    const { created_at, turns: at, ...kept } = JSON.parse(localStorage.getItem(stoppedKey(id)) ?? 'null') ?? {};
    if (typeof created_at !== 'string' || created_at !== session.created_at || at !== session.counts?.turns)
      return undefined;
    const keys = Object.keys(kept);
    if (keys.length === 0) return {};
    const turns = kept.max_turns;
    if (keys.length > 1 || turns === undefined) return undefined;
    return Number.isSafeInteger(turns) && turns > 0 ? { max_turns: turns } : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Keeps the turn limit a stop of session `id` replaced, with `stopped` (the session the stop's
 * PATCH answered) as `replacedTurns` checks it; with `undefined`, forgets it.
 */
function keepReplaced(id: string, turns: { max_turns?: number } | undefined, stopped?: any): void {
  try {
    if (!turns) localStorage.removeItem(stoppedKey(id));
    else {
      const kept = { ...turns, created_at: stopped?.created_at, turns: stopped?.counts?.turns };
      localStorage.setItem(stoppedKey(id), JSON.stringify(kept));
    }
  } catch {
    // No storage: a lift says it removes the turn limit.
  }
}

/** The budget and usage last drawn: a poll bringing the same draws nothing (a confirm stays open). */
let drawn = '';

/** A limit of a budget against what was spent: `turns 2 / 3`, `$0.41 / $1.00`, `tokens 1200 / 5000`. */
function limitText(limit: string, spent: number, max: number): string {
  if (limit === 'max_cost_usd') return budgetCostText(spent, max);
  return `${limit === 'max_turns' ? 'turns' : 'tokens'} ${spent} / ${max}`;
}

/** Each limit of `budget` against what `usage` spent, and whether one is reached. */
export function budgetText(budget: Budget | null, usage: any): { text: string; reached: boolean } {
  if (!budget || Object.keys(budget).length === 0) return { text: 'No budget.', reached: false };
  const parts: string[] = [];
  let reached = false;
  const limit = (name: keyof Budget, spent: number) => {
    const max = budget[name];
    if (max === undefined) return;
    parts.push(limitText(name, spent, max));
    reached ||= spent >= max;
  };
  limit('max_turns', usage?.turns ?? 0);
  // The cost limit counts priced turns only (docs/API.md, "budget").
  limit('max_cost_usd', usage?.priced_cost_usd ?? 0);
  limit('max_total_tokens', usage?.total_tokens ?? 0);
  if (reached)
    parts.push(`${budget.max_turns === 0 ? 'stopped' : 'spent'}: the next turn is refused, queued inputs wait`);
  return { text: `Budget: ${parts.join(' · ')}`, reached };
}

/**
 * What the `held` of a queue listing says: the spent session budget its inputs wait behind
 * (the 402 `budget_exhausted` the next turn meets), and that raising or lifting it runs them.
 */
export function heldText(held: { limit: string; spent: number; value: number }): string {
  const spent = limitText(held.limit, held.spent, held.value);
  return `Held: the session's budget is spent (${spent}); raise or lift it to run these inputs`;
}

/** Draws the budget line and its buttons for `session` (read or polled); unchanged, nothing. */
export function renderBudget(id: string, session: any, force = false): void {
  const now = JSON.stringify([id, session.budget, session.usage]);
  if (now === drawn && !force) return;
  drawn = now;
  const budget: Budget | null = session.budget ?? null;
  const { text } = budgetText(budget, session.usage);
  const box = $('session-budget-box');
  const line = el('p', { id: 'session-budget', class: 'muted' }, text);
  const said = el('p', { id: 'budget-status', role: 'status' });
  const stopped = budget?.max_turns === 0;
  // Running again (lifted here or elsewhere): what a stop replaced no longer says what to restore.
  if (!stopped) keepReplaced(id, undefined);
  const actions = el('div', { class: 'row' });
  // A button replaced while it had focus (a step of the stop, a redraw) hands it to the one drawn next.
  let focus = box.contains(document.activeElement);
  box.replaceChildren(line, actions, said);
  if (!may('admin')) return;
  const button = (label: string, act: () => void) => {
    const node = el('button', { type: 'button' }, label);
    node.addEventListener('click', () => {
      focus = true;
      act();
    });
    return node;
  };
  const show = (...nodes: Node[]) => {
    actions.replaceChildren(...nodes);
    if (focus) actions.querySelector('button')?.focus();
  };
  const save = async (next: Budget | null): Promise<any> => {
    try {
      const saved = await api(sessionPath(id), { method: 'PATCH', body: JSON.stringify({ budget: next }) });
      $('session-counts').textContent = countsText(saved);
      renderBudget(id, saved, true);
      return saved;
    } catch (error) {
      if (error instanceof Unauthorized) return undefined;
      const reason = error instanceof Error ? error.message : String(error);
      said.textContent =
        error instanceof ApiError && error.status === 403
          ? `This token may not change the budget (that needs admin): ${reason}`
          : `The budget could not be changed: ${reason}`;
      return undefined;
    }
  };
  if (stopped) {
    // The other limits as they stand now (another client may have changed them since the stop).
    const { max_turns: _, ...rest } = budget;
    const lift = (turns: { max_turns?: number }) => {
      const restored = { ...rest, ...turns };
      void save(Object.keys(restored).length > 0 ? restored : null);
    };
    const unknown = () =>
      show(
        el(
          'span',
          {},
          'This browser does not know the turn limit the stop replaced: lifting it removes the turn limit. ',
        ),
        button('Lift, no turn limit', () => lift({})),
        button('Keep stopped', offerLift),
      );
    const offerLift = () =>
      show(
        button('Lift stop', () => {
          const turns = replacedTurns(id, session);
          if (turns) lift(turns);
          else unknown();
        }),
      );
    offerLift();
    return;
  }
  const ask = () =>
    show(
      el('span', {}, 'Stop this session? Its next turn is refused and its queued inputs wait. '),
      button('Confirm stop', async () => {
        const turns = budget?.max_turns;
        const replaced = turns === undefined ? {} : { max_turns: turns };
        const answer = await save({ ...budget, max_turns: 0 });
        if (answer) keepReplaced(id, replaced, answer);
      }),
      button('Keep running', offer),
    );
  const offer = () => show(button('Stop session', ask));
  offer();
}
