import { describe, expect, it } from 'vitest';
import type { TurnOutcome } from '../../lib/session/log/types.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { claimedTurn, SPENT as USAGE, user } from '../support/refused-writes.ts';
import { SessionLog } from '../support/session-log.ts';

// A turn's completion stores, beside its items, the usage the session's totals add, the context
// start, the overflow boundary and the notices still undelivered: one of them that its readers
// (`doneSchema`) would refuse is refused before the put, and the session stays readable, the turn
// left to its lease (closed by the next claim once it ran out).

const LEASE_MS = 1000;

describe("a completion's carried field its readers would refuse", () => {
  it.each<[string, Partial<TurnOutcome>]>([
    ['a fractional usage', { usage: { ...USAGE, input_tokens: 1.5 } }],
    ['a negative summary usage', { summaryUsage: { ...USAGE, output_tokens: -1 } }],
    ['an overflow boundary at seq 0', { overflow: { tool_start_seq: 0, message_start_seq: 0, turn: 1 } }],
    ['a lost turn 0', { undelivered: { notices: [], lost_turns: [{ turn: 0, since: 'x' }] } }],
  ])('%s: refused, nothing stored, the session readable', async (_name, carried) => {
    let now = Date.parse('2030-01-01T00:00:00Z');
    const sessions = new SessionLog(new MemoryStore(), { clock: () => new Date(now), leaseMs: LEASE_MS });
    const turn = await claimedTurn(sessions);
    const outcome: TurnOutcome = { status: 'completed', output: [user('echo')], receipt: {}, ...carried };
    await expect(sessions.completeTurn(turn, outcome)).rejects.toThrow(/invariant/);
    expect((await sessions.get('s')).counts).toMatchObject({ items: 1, turns: 1 });
    now += 2 * LEASE_MS;
    const next = await sessions.beginTurn('s', { input: [user('two')] });
    expect(next.kind).toBe('claimed');
    expect((await sessions.get('s')).counts).toMatchObject({ items: 2, turns: 2 });
  });
});
