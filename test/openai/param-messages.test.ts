import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { clientOnTailgate } from './server.ts';

// docs/OPENAI.md, "Errors": a refused field is a 400 whose `param` names it and whose message
// starts with that `param` (`param: ...`), as a client shows the message alone.
const world = clientOnTailgate();
const refused = (promise: Promise<unknown>) => promise.catch((error: unknown) => error);

describe('a 400 naming a field', () => {
  it('starts its message with the param it names, on every route', async () => {
    const { client } = world;
    const first = await client.responses.create({ model: 'echo', input: 'not streamed' });
    const image = dataUrl('image/png', pngBytes(16, 16, 200, 1));
    const shown = await client.responses.create({
      model: 'echo',
      input: [{ role: 'user', content: [{ type: 'input_image', image_url: image, detail: 'auto' }] }],
    });
    const { data } = await client.responses.inputItems.list(shown.id);
    const refusals = await Promise.all([
      // No input to count (as a compact without input).
      refused(client.responses.inputTokens.count({ model: 'echo' })),
      // A stream of a response that was neither streamed nor in the background.
      refused(
        (async () => {
          for await (const _ of await client.responses.retrieve(first.id, { stream: true }));
        })(),
      ),
      // An item_reference to an item holding an image, in a function call's output's place.
      refused(
        client.responses.create({
          model: 'echo',
          input: [
            { type: 'function_call', call_id: 'c1', name: 'f', arguments: '{}' },
            { type: 'function_call_output', call_id: 'c1', output: 'ok' },
            { type: 'item_reference', id: data[0]!.id! },
          ],
        }),
      ),
      // An allowed_tools entry naming no tool offered, on both routes that take it.
      refused(
        client.responses.create({
          model: 'echo',
          input: 'hi',
          tools: [{ type: 'function', name: 'f', parameters: { type: 'object', properties: {} }, strict: false }],
          tool_choice: { type: 'allowed_tools', mode: 'auto', tools: [{ type: 'function', name: 'g' }] },
        }),
      ),
      refused(
        client.chat.completions.create({
          model: 'echo',
          messages: [{ role: 'user', content: 'hi' }],
          tools: [{ type: 'function', function: { name: 'f', parameters: { type: 'object', properties: {} } } }],
          tool_choice: {
            type: 'allowed_tools',
            allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'g' } }] },
          },
        }),
      ),
    ]);
    for (const error of refusals) {
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      const { param, message } = error as InstanceType<typeof OpenAI.BadRequestError>;
      expect(param).toEqual(expect.any(String));
      expect(message.startsWith(`400 ${param}: `), message).toBe(true);
    }
  });
});
