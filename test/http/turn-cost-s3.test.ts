import { describe, expect, inject, it } from 'vitest';
import type { ObjectStore } from '../../lib/store/object-store.ts';
import { requireConditionalWrites } from '../../lib/store/write-probe.ts';
import { countedProcess, type CountedLine } from '../support/counted-process.ts';
import type { StoreCall } from '../support/faulty-store.ts';
import { killedAtCompletion } from '../support/killed-at-completion.ts';
import { conditionalGatewayForFile } from '../support/s3-gateway-hooks.ts';
import { createTestS3Store } from '../support/s3-store.ts';
import { TOKEN } from './http-suite.ts';

/**
 * What a turn costs in storage operations on S3 (S3Store over fauxqs, through the conditional
 * gateway), whose listings carry no metadata, as its log line counts them (`storage_ops`),
 * against README.md and docs/ARCHITECTURE.md ("The path of one turn"): a plain turn, one that
 * delivers notices, one that delivers a notice whose name was delivered before, and the turn
 * after one closed by its lease that held notices (test/http/dead-turn-notices.test.ts has it on
 * the memory store). Each measured turn runs in a process started afresh (no record or view
 * cached; its store's write probe, which a server runs at its start, already run), on a
 * session whose background packing has written a view: the 8 operations of a turn.
 */

const gateway = conditionalGatewayForFile();
// Long enough that no measured turn renews its lease (a renewal, a third of it in, is a get and
// a put) however loaded the machine; passLease moves the clock past it instead of waiting.
const LEASE_MS = 30_000;

/** What a plain turn costs: config, listing, view, newest record and its completion; inbox listing; two puts. */
const PLAIN = { get: 4, head: 0, put: 2, list: 2, delete: 0, total: 8 };

/** `PLAIN` with `more` added to each operation and the total. */
function plus(more: Partial<Record<'get' | 'head' | 'put' | 'list' | 'delete', number>>) {
  const sum = { ...PLAIN };
  for (const [operation, count] of Object.entries(more) as [keyof typeof PLAIN, number][]) {
    sum[operation] += count;
    sum.total += count;
  }
  return sum;
}

/** Session `s` under a key prefix of its own, after 8 plain turns, served by processes of the app. */
async function world(settings: Record<string, string> = {}) {
  const environment = {
    API_TOKEN: TOKEN,
    DEFAULT_MODEL: 'echo',
    TURN_LEASE_MS: String(LEASE_MS),
    KEY_PREFIX: `turn-cost-${crypto.randomUUID()}/`,
    ...settings,
  };
  // The wall clock, which S3's upload times follow, moved on by `offset` to pass a lease; a
  // millisecond later at each stamp.
  let offset = 0;
  let last = 0;
  const clock = () => {
    last = Math.max(Date.now() + offset, last + 1);
    return new Date(last);
  };
  /** A process started afresh, its store as `wrap` gives it. */
  const processOf = async (wrap: (store: ObjectStore) => ObjectStore = (inner) => inner) => {
    const store = createTestS3Store(gateway().endpoint, inject('s3Bucket'));
    await requireConditionalWrites(store, { keyPrefix: environment.KEY_PREFIX });
    return countedProcess(wrap(store), { environment, clock, base: '/v1/sessions' });
  };
  /** A turn (input `input`) by a process started afresh: its response and log line. */
  const turn = async (input: string | [] = 'go') => {
    const fresh = await processOf();
    const response = await fresh.call('POST', '/s/turns', { input });
    expect(response.status).toBe(200);
    await fresh.drain();
    return { body: response.body, line: fresh.lines.find((line) => line.turn !== null)! };
  };
  /** Posts notice `name`. */
  const post = async (name: string) => {
    const poster = await processOf();
    expect((await poster.call('POST', '/s/inbox', { name, content: `about ${name}` })).status).toBe(201);
  };
  const setup = await processOf();
  expect((await setup.call('POST', '', { id: 's' })).status).toBe(201);
  for (let index = 0; index < 8; index++) {
    expect((await setup.call('POST', '/s/turns', { input: `setup ${index}` })).status).toBe(200);
    await setup.drain();
  }
  return {
    processOf,
    turn,
    post,
    passLease: () => {
      offset += LEASE_MS + 1;
    },
  };
}

/** Of `line`'s calls, the keys (after the session's prefix) `operation` was called on. */
function keysOf(line: CountedLine, operation: StoreCall['operation']): string[] {
  return line.calls
    .filter((call) => call.operation === operation && call.key.includes('/sessions/s/'))
    .map((call) => call.key.slice(call.key.indexOf('/sessions/s/') + '/sessions/s/'.length))
    .sort();
}

describe('the storage operations of a turn on S3', () => {
  it('are 8 for a plain turn, and 4 more per notice it delivers', async () => {
    const { turn, post } = await world();
    const plain = (await turn()).line;
    expect(plain.storage_ops).toEqual(PLAIN);
    expect(keysOf(plain, 'get').filter((key) => key.endsWith('.view'))).toHaveLength(1);

    await post('a.md');
    await post('b.md');
    const two = await turn();
    expect(two.body.context.notices_delivered).toEqual(['a.md', 'b.md']);
    // Per notice: its get, a head of it before its move, the claim's put, the original's delete.
    expect(two.line.storage_ops).toEqual(plus({ get: 2, head: 2, put: 2, delete: 2 }));
    expect(keysOf(two.line, 'head')).toEqual(['inbox/a.md', 'inbox/b.md']);
  });

  it('are 7 per notice whose name was delivered before, on S3 a head more per slot since 5 s before it', async () => {
    // One notice a turn, so that a notice of another name fills a slot of `b.md` after `b.md` was
    // posted: a slot since 5 s before it (S3's upload times) however slow the machine. One older
    // than that is not headed; no test waits 5 s for it.
    const { turn, post } = await world({ MAX_NOTICES_PER_TURN: '1' });
    await post('a.md');
    expect((await turn()).body.context.notices_delivered).toEqual(['a.md']);

    // `a.md` taken, no slot `a.<n>.md` yet: the claim's put refused, a head of what holds the
    // name, a listing of its slots (which shows `a.md`, never headed), the put at slot 1.
    await post('a.md');
    const again = await turn();
    expect(again.body.context.notices_delivered).toEqual(['a.md']);
    expect(again.line.storage_ops).toEqual(plus({ get: 1, head: 2, put: 2, list: 1, delete: 1 }));
    expect(keysOf(again.line, 'head')).toEqual(['inbox/a.md', 'inbox_removed/a.md']);
    expect(keysOf(again.line, 'list')).toContain('inbox_removed/a.');
    expect(keysOf(again.line, 'put').filter((key) => key.startsWith('inbox_removed/'))).toEqual([
      'inbox_removed/a.1.md',
      'inbox_removed/a.md',
    ]);

    // `b.md` posted again, then `b.1.md`, delivered first (name order) into slot 1 of `b.md`,
    // so after `b.md` was posted: a slot that may hold a claim of it (lib/inbox/slots.ts).
    await post('b.md');
    expect((await turn()).body.context.notices_delivered).toEqual(['b.md']);
    await post('b.md');
    await post('b.1.md');
    expect((await turn()).body.context.notices_delivered).toEqual(['b.1.md']);
    const recent = await turn();
    expect(recent.body.context.notices_delivered).toEqual(['b.md']);
    // As above, and a head of slot 1: S3's listing does not tell whose claim it is.
    expect(recent.line.storage_ops).toEqual(plus({ get: 1, head: 3, put: 2, list: 1, delete: 1 }));
    expect(keysOf(recent.line, 'head')).toEqual(['inbox/b.md', 'inbox_removed/b.1.md', 'inbox_removed/b.md']);
    expect(keysOf(recent.line, 'put')).toContain('inbox_removed/b.2.md');
  });

  it('are 3 more after a turn closed by its lease, a head per record since its claim, 4 per notice taken', async () => {
    const { processOf, turn, post, passLease } = await world();
    await post('a.md');
    await post('b.md');
    // Turn 9 takes both notices; its process dies as it writes its completion.
    const dying = await processOf(killedAtCompletion);
    expect((await dying.call('POST', '/s/turns', { input: 'dies' })).status).toBeGreaterThanOrEqual(500);
    await dying.drain();
    passLease();
    const reader = await processOf();
    expect((await reader.call('GET', '/s/turns/9')).body).toMatchObject({
      status: 'failed',
      error: { code: 'lease_expired' },
    });
    await reader.drain();

    const retake = await turn([]);
    expect(retake.body.context.notices_delivered).toEqual(['a.md', 'b.md']);
    // 3 more: what turn 9 spent, got by the claim and by the completion; a listing of
    // `inbox_removed/`. On S3 a head per record it lists uploaded since 5 s before turn 9's
    // claim (the two turn 9 wrote). Per notice taken over: its get, and 3 puts (the decision
    // key, the record naming turn 10, the confirmation).
    expect(retake.line.storage_ops).toEqual(plus({ get: 2 + 2, head: 2, put: 6, list: 1 }));
    expect(keysOf(retake.line, 'head')).toEqual(['inbox_removed/a.md', 'inbox_removed/b.md']);
    expect(keysOf(retake.line, 'get').filter((key) => key.startsWith('spent/'))).toHaveLength(2);
    expect(keysOf(retake.line, 'list').filter((key) => key.startsWith('inbox_removed/'))).toHaveLength(1);
  });
});
