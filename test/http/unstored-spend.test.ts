import { describe, expect, it } from 'vitest';
import { echoModel } from '../../lib/models/echo.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { appHarness } from '../support/app-harness.ts';
import { FaultyStore, type StoreCall } from '../support/faulty-store.ts';
import { heldOptions } from '../support/slow-echo.ts';
import { createClient, SIGNING_KEY, TOKEN } from './http-suite.ts';

// A turn whose model call answered but whose completion could not be stored, nor its failed
// completion after it (the store failing its puts), stays open until a closer finds its lease
// run out. The provider billed the call all the same: the turn charges its token, and stores what
// it spent as a stopped turn does (lib/session/log/unbilled.ts), so the session's totals and
// budget count it once that closer's completion named it. Else a runaway agent whose turns keep
// failing so would never meet its budget.

const environment = { API_TOKEN: TOKEN, TOKEN_SIGNING_KEY: SIGNING_KEY, DEFAULT_MODEL: 'echo', TURN_LEASE_MS: '3000' };
const hourLater = () => new Date(Date.now() + 3_600_000);
const completionPut = ({ operation, key }: StoreCall) => operation === 'put' && key.endsWith('.done');
/** What the echo model reports for a turn whose input is `hello there`. */
const spent = { input_tokens: 3, output_tokens: 5 };

describe('a turn whose completions could not be stored after its model call answered', () => {
  it("charges its token, and its session's totals and budget once a closer closed it", async () => {
    const store = new FaultyStore(new MemoryStore());
    const { options, drain } = heldOptions(echoModel);
    const api = createClient(appHarness(store, environment, options));
    // Another process, an hour later: the turn's lease ran out.
    const later = createClient(appHarness(store, environment, { clock: hourLater }));
    const minted = await api.post('/v1/tokens', {
      scopes: ['session:turn', 'session:read'],
      budget: { max_total_tokens: 1_000_000 },
      ttl_seconds: 7200,
    });
    expect(minted.status, JSON.stringify(minted.body)).toBe(201);
    const auth = { authorization: `Bearer ${minted.body.token as string}` };
    // Two such turns' tokens and more: the budget stops the session only once the failed one counts.
    const id = await api.session({ budget: { max_total_tokens: 12 } });

    // Its completion and then its failed completion fail.
    store.failWhen(completionPut, { times: 2 });
    const failed = await api.post(`/v1/sessions/${id}/turns`, { input: 'hello there' }, auth);
    expect(failed.status, JSON.stringify(failed.body)).toBe(503);
    await drain();
    store.heal();
    expect((await api.get('/v1/tokens/current', auth)).body.usage).toMatchObject({ turns: 0, ...spent });

    // The next turn closes it (its lease ran out) and counts what it spent.
    const next = await later.post(`/v1/sessions/${id}/turns`, { input: 'hello there' }, auth);
    expect(next.status, JSON.stringify(next.body)).toBe(200);
    expect(next.body.turn).toBe(2);
    const usage = (await later.get(`/v1/sessions/${id}`)).body.usage;
    const own = next.body.usage;
    const input_tokens = spent.input_tokens + own.input_tokens;
    const output_tokens = spent.output_tokens + own.output_tokens;
    expect(usage).toMatchObject({ turns: 1, input_tokens, output_tokens });
    const receipt = (await later.get(`/v1/sessions/${id}/turns/1`)).body;
    expect(receipt).toMatchObject({ status: 'failed', error: { code: 'lease_expired' }, usage: spent });
    // Without the failed turn's, the session spent less than its budget: refused now.
    expect(own.input_tokens + own.output_tokens).toBeLessThan(12);
    const refused = await later.post(`/v1/sessions/${id}/turns`, { input: 'go on' }, auth);
    expect(refused.status, JSON.stringify(refused.body)).toBe(402);
    expect(refused.body.error.details).toMatchObject({ budget: 'session', spent: input_tokens + output_tokens });
  });
});
