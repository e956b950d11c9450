import { Output } from 'ai';
import { describe, expect, it } from 'vitest';
import { settingsOf } from '../../lib/models/call-settings.ts';

const schema = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };

describe('settingsOf', () => {
  it.each([
    ['json_object', { type: 'json_object' as const }, { type: 'json' }],
    [
      'json_schema',
      { type: 'json_schema' as const, name: 'weather', schema, description: 'The weather' },
      { type: 'json', schema, name: 'weather', description: 'The weather' },
    ],
    [
      'json_schema without a description',
      { type: 'json_schema' as const, name: 'w', schema },
      { type: 'json', schema, name: 'w' },
    ],
  ])(
    "asks for a response format of %s and parses the text as the AI SDK's Output.text() does",
    async (_, format, asked) => {
      const output = settingsOf({ responseFormat: format }).output!;
      const text = Output.text();
      expect(output.name).toBe('json');
      expect(await output.responseFormat).toEqual(asked);
      const context = { response: {}, usage: {}, finishReason: 'stop' } as never;
      for (const reply of ['{"city":"Paris"}', '{"city":', 'not json', '']) {
        expect(await output.parseCompleteOutput({ text: reply }, context)).toEqual(
          await text.parseCompleteOutput({ text: reply }, context),
        );
        expect(await output.parsePartialOutput({ text: reply })).toEqual(
          await text.parsePartialOutput({ text: reply }),
        );
      }
      expect(output.createElementStreamTransform()).toEqual(text.createElementStreamTransform());
    },
  );

  it('asks for no output without a response format', () => {
    expect(settingsOf({}).output).toBeUndefined();
    expect(settingsOf(undefined)).toEqual({});
  });
});
