import { expect, it } from 'vitest';
import type { Item } from '../../lib/items.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { SessionLog } from '../support/session-log.ts';

// A turn that ran in the background (its record's settings say `background`) says so in its
// receipt, `background: true`, completed or cancelled, and still once a pack moved it into a
// segment (its line's receipt keeps it); any other turn has no `background`.

const user = (content: string): Item => ({ type: 'message', role: 'user', content });

it("a background turn's receipt says background, before and after a pack", async () => {
  const sessions = new SessionLog(new MemoryStore(), { keepRecords: 1, packMinRecords: 1 });
  await sessions.create({ id: 's' });
  const take = async (text: string, background: boolean) => {
    const request = background ? { background: true } : {};
    const begun = await sessions.beginTurn('s', { input: [user(text)], request });
    if (begun.kind !== 'claimed') throw new Error('expected a claim');
    return begun.turn;
  };
  const complete = async (text: string, background: boolean) => {
    const turn = await take(text, background);
    await sessions.completeTurn(turn, { status: 'completed', output: [user(`echo: ${text}`)], receipt: {} });
  };
  await complete('one', true);
  await take('two', true);
  await sessions.cancelTurn('s', 2, false);
  await complete('three', false);
  await take('four', false);
  await sessions.cancelTurn('s', 4, false);
  await complete('five', false);
  const shown = async () =>
    (await sessions.listTurns('s', { limit: 10 })).turns.map(({ turn, status, background }) => ({
      turn,
      status,
      background,
    }));
  const expected = [
    { turn: 5, status: 'completed', background: undefined },
    { turn: 4, status: 'cancelled', background: undefined },
    { turn: 3, status: 'completed', background: undefined },
    { turn: 2, status: 'cancelled', background: true },
    { turn: 1, status: 'completed', background: true },
  ];
  expect(await shown()).toEqual(expected);
  const packed = await sessions.pack('s');
  expect(packed.packed).toBe(true);
  expect(packed.through).toBeGreaterThanOrEqual(4);
  expect(await shown()).toEqual(expected);
  expect((await sessions.getTurn('s', 2)).background).toBe(true);
  expect('background' in (await sessions.getTurn('s', 3))).toBe(false);
});
