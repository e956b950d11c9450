import { describe, expect, it } from 'vitest';
import { SeededRandom } from '../../bench/random.ts';
import { journalEvents, journalTurn, type NumberedEvent } from '../../lib/turn/journal.ts';
import { openTurnServices } from '../support/journal-services.ts';
import { SlowJournalStore } from '../support/slow-journal-store.ts';

/**
 * The property `GET .../turns/{turn}/events` (functions/routes/events.ts) rests on: a reader
 * that disconnects at any point (after a random number of events, or a random time into a
 * connection, often while a batch is being written) and resumes after the last event it got
 * sees every event once, in order, and the same text as a reader that never disconnected.
 */

async function streamedTurn(seed: number) {
  const store = new SlowJournalStore(seed);
  const { services, background } = await openTurnServices(store, 'p');
  const random = new SeededRandom(seed * 7919);
  const words = Array.from({ length: 40 }, (_, index) => `w${index} `);
  // The owner: a delta every 0..90 ms (about two seconds, so two or three batches), then the end.
  const owner = (async () => {
    const journal = journalTurn(services, 'p');
    journal.emit({ event: 'turn.started', data: { turn: 1, first_seq: 2 } });
    for (const delta of words) {
      await new Promise((resolve) => setTimeout(resolve, random.integer(0, 90)));
      journal.emit({ event: 'output_text.delta', data: { delta } });
    }
    journal.emit({ event: 'error', data: { error: { code: 'model_error', message: 'end' } }, cause: null });
    journal.close();
    await Promise.all(background);
  })();
  return { store, services, random, text: words.join(''), owner };
}

const textOf = (events: NumberedEvent[]) =>
  events.map((event) => (event.event === 'output_text.delta' ? (event.data as { delta: string }).delta : '')).join('');

describe('resuming a turn event journal', () => {
  it('gives every event once, in order, whatever the disconnect points, batch writes in flight included', async () => {
    let duringWrite = 0;
    const runs = [1, 2, 3, 4, 5, 6].map(async (seed) => {
      const { store, services, random, text, owner } = await streamedTurn(seed);
      const seen: NumberedEvent[] = [];
      for (let connections = 0; connections < 500 && seen.at(-1)?.event !== 'error'; connections++) {
        const stop = new AbortController();
        const byTime = random.next() < 0.5;
        const limit = random.integer(1, 6);
        const timer = byTime ? setTimeout(() => stop.abort(), random.integer(0, 700)) : undefined;
        let got = 0;
        for await (const event of journalEvents(services, 'p', 1, seen.at(-1)?.n ?? 0, stop.signal)) {
          seen.push(event);
          if (!byTime && ++got >= limit) break;
          if (stop.signal.aborted) break;
        }
        clearTimeout(timer);
      }
      await owner;
      // The reader met the journal while a batch of it was being written.
      duringWrite += store.readsDuringWrite;
      expect(seen.map((event) => event.n)).toEqual(seen.map((_, index) => index + 1));
      expect(textOf(seen)).toBe(text);
      // The same as a reader that never disconnected.
      const whole: NumberedEvent[] = [];
      for await (const event of journalEvents(services, 'p', 1, 0)) whole.push(event);
      expect(seen).toEqual(whole);
    });
    await Promise.all(runs);
    expect(duringWrite).toBeGreaterThan(0);
  });
});
