import { expect, it } from 'vitest';
import { createApp } from '../../functions/app.ts';
import { echoModel } from '../../lib/models/echo.ts';
import type { Model, ModelRequest, ModelResult } from '../../lib/models/model.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { clientInProcess, TOKEN } from './server.ts';

// A model whose calls all carry the same call id (as some providers' do): a step naming an
// older response of a loop whose newest step runs, answering a call by an id the running step
// answers too, branches as any step naming that response does (test/openai/branch-while-busy.test.ts),
// not refused 409 as a retry of the running step.

const environment = { API_TOKEN: TOKEN, DEFAULT_MODEL: 'echo' };
const tools = [{ type: 'function' as const, name: 'get_weather', strict: false, parameters: { type: 'object' } }];

/** The echo model, each call's id `call_same`; a prompt ending with output `held` waits for `release`. */
function sameIds() {
  let release = () => {};
  const gate = new Promise<void>((resolve) => (release = resolve));
  let reached = () => {};
  const held = new Promise<void>((resolve) => (reached = resolve));
  const renamed = (result: ModelResult): ModelResult => ({
    ...result,
    output: result.output.map((item) => (item.type === 'function_call' ? { ...item, call_id: 'call_same' } : item)),
  });
  const model: Model = {
    ...echoModel,
    async generate(request: ModelRequest) {
      const last = request.prompt.at(-1);
      if (last?.type === 'function_call_output' && JSON.stringify(last).includes('held')) {
        reached();
        await gate;
      }
      return renamed(await echoModel.generate(request));
    },
  };
  return { model, release, held };
}

it('a step naming an older response, answering a call id the running step answers, branches', async () => {
  const { model, release, held } = sameIds();
  const app = createApp({
    store: () => store,
    readEnvironment: () => environment,
    log: () => {},
    logLine: () => {},
    wrapModel: () => model,
  });
  const store = new MemoryStore();
  const openai = clientInProcess(app, TOKEN);
  const output = (text: string) => ({ type: 'function_call_output' as const, call_id: 'call_same', output: text });
  const first = await openai.responses.create({ input: 'call get_weather {"city":"x"}', tools });
  expect(first.output[0]).toMatchObject({ type: 'function_call', call_id: 'call_same' });
  const second = await openai.responses.create({
    input: [output('18C'), { role: 'user', content: 'call get_weather {"city":"y"}' }],
    previous_response_id: first.id,
    tools,
  });
  expect(second.output[0]).toMatchObject({ type: 'function_call', call_id: 'call_same' });
  const running = openai.responses.create({ input: [output('held')], previous_response_id: second.id, tools });
  try {
    await held;
    const branch = await openai.responses
      .create({ input: [output('20C')], previous_response_id: first.id, tools })
      .catch((error: unknown) => error);
    expect(branch).toMatchObject({ status: 'completed' });
    expect((branch as { conversation?: { id: string } }).conversation?.id).not.toBe(first.conversation?.id);
  } finally {
    release();
  }
  await expect(running).resolves.toMatchObject({ status: 'completed' });
});
