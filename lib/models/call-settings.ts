import type { JSONSchema7, Output } from 'ai';
import type { ModelSettings } from './model.ts';

/** A request's settings as the AI SDK's call settings (lib/models/sdk-model.ts). */

export function optional<Key extends string, Value>(key: Key, value: Value | undefined): { [K in Key]?: Value } {
  return (value === undefined ? {} : { [key]: value }) as { [K in Key]?: Value };
}

/** The AI SDK call settings of a request's `settings` (provider options aside). */
export function settingsOf(settings: ModelSettings | undefined) {
  if (!settings) return {};
  const choice = settings.toolChoice;
  return {
    ...optional('topP', settings.topP),
    ...optional('presencePenalty', settings.presencePenalty),
    ...optional('frequencyPenalty', settings.frequencyPenalty),
    ...optional('stopSequences', settings.stopSequences),
    ...optional('seed', settings.seed),
    ...optional('reasoning', settings.reasoningEffort),
    ...optional('toolChoice', typeof choice === 'object' ? { type: 'tool' as const, toolName: choice.name } : choice),
    ...optional('output', settings.responseFormat ? jsonOutput(settings.responseFormat) : undefined),
  };
}

/**
 * Structured output as the response format only: the text comes back as the model wrote it
 * (the client parses it), so a reply that does not parse is not turned into a failure here.
 * The parsing is the AI SDK's `Output.text()`'s, written out: the `Output` namespace would keep
 * its object, array, choice and JSON outputs in the Worker bundle (about 1 KiB gzipped).
 */
function jsonOutput(format: NonNullable<ModelSettings['responseFormat']>): Output.Output<string, string, never> {
  return {
    parseCompleteOutput: async ({ text }) => text,
    parsePartialOutput: async ({ text }) => ({ partial: text }),
    createElementStreamTransform: () => undefined,
    name: 'json',
    responseFormat: Promise.resolve(
      format.type === 'json_object'
        ? { type: 'json' as const }
        : {
            type: 'json' as const,
            schema: format.schema as JSONSchema7,
            name: format.name,
            ...optional('description', format.description),
          },
    ),
  };
}
