import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { dataUrl, pngBytes } from '../support/media-fixtures.ts';
import { clientOnTailgate } from './server.ts';

// OpenAI takes in a user, system or developer message the parts a client writes (input_text,
// input_image, input_file), and in an assistant message the parts a model wrote (output_text,
// refusal): it refuses an `output_text` part in a user message and an image or file in an
// assistant one. tailgate refuses them as it does, naming the part's type; what it answers and
// lists (an assistant message's text as output_text, a user message's parts as input_*) is sent
// back as it is.
const world = clientOnTailgate();
const refused = (promise: Promise<unknown>) => promise.catch((error: unknown) => error);
const PNG = dataUrl('image/png', pngBytes(1, 1));
/** A user message of text and an image, as a client sends it. */
const look = {
  role: 'user' as const,
  content: [
    { type: 'input_text' as const, text: 'look' },
    { type: 'input_image' as const, image_url: PNG, detail: 'auto' as const },
  ],
};
const PDF = 'data:application/pdf;base64,JVBERi0xLjQKJSVFT0YK';

describe("a message's content parts", () => {
  it.each(['user', 'system', 'developer'] as const)(
    'an output_text part in a %s message is a 400 naming it',
    async (role) => {
      const input = [
        {
          role,
          content: [
            { type: 'input_text', text: 'hi' },
            { type: 'output_text', text: 'no' },
          ],
        },
      ];
      const error = await refused(world.client.responses.create({ model: 'echo', input: input as never }));
      expect(error).toBeInstanceOf(OpenAI.BadRequestError);
      expect(error).toMatchObject({ status: 400, param: 'input[0].content[1].type' });
      expect((error as Error).message).toMatch(
        /^400 input\[0\]\.content\[1\]\.type: .*input_text, input_image, input_file/,
      );
    },
  );

  it.each([
    ['input_image', { type: 'input_image', image_url: PNG }],
    ['input_file', { type: 'input_file', file_data: PDF, filename: 'a.pdf' }],
  ])('an %s part in an assistant message is a 400 naming it, for a create and an append', async (_type, part) => {
    const input = [
      { role: 'user', content: 'draw' },
      { role: 'assistant', content: [{ type: 'output_text', text: 'here' }, part] },
    ];
    const created = await refused(world.client.responses.create({ model: 'echo', input: input as never }));
    expect(created).toBeInstanceOf(OpenAI.BadRequestError);
    expect(created).toMatchObject({ status: 400, param: 'input[1].content[1].type' });
    expect((created as Error).message).toMatch(
      /^400 input\[1\]\.content\[1\]\.type: an assistant message takes output_text, refusal/,
    );
    const conversation = await world.client.conversations.create({});
    const appended = await refused(world.client.conversations.items.create(conversation.id, { items: input as never }));
    expect(appended).toMatchObject({ status: 400, param: 'items[1].content[1].type' });
    const made = await refused(world.client.conversations.create({ items: input as never }));
    expect(made).toMatchObject({ status: 400, param: 'items[1].content[1].type' });
    const counted = await refused(world.client.responses.inputTokens.count({ model: 'echo', input: input as never }));
    expect(counted).toMatchObject({ status: 400, param: 'input[1].content[1].type' });
  });

  it('takes back what it lists (assistant text as output_text), and input_text in an assistant message', async () => {
    const first = await world.client.responses.create({
      model: 'echo',
      input: [look],
    });
    const listed = await world.client.conversations.items.list(first.conversation!.id, { order: 'asc' });
    const sentBack = listed.data.map((item) => {
      const { id: _id, ...rest } = item as unknown as Record<string, unknown>;
      return rest;
    });
    expect(sentBack.map((item) => (item.content as { type: string }[]).map((part) => part.type))).toEqual([
      ['input_text', 'input_image'],
      ['output_text'],
    ]);
    // Parts listed with a blob reference are not resent as such; a fresh image stands in for it.
    const resent = await world.client.responses.create({
      model: 'echo',
      input: [
        look,
        sentBack[1] as never,
        // OpenAI takes only output_text and refusal here; input_text is text all the same, and kept.
        { role: 'assistant', content: [{ type: 'input_text', text: 'more' }] },
        { role: 'user', content: 'again' },
      ],
    });
    expect(resent.output_text).toMatch(/^echo: again/);
  });
});
