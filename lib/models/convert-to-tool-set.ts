import { jsonSchema, tool, type ToolSet } from 'ai';
import type { Tool } from '../items.ts';
import type { ProviderOptions } from './convert-to-model-messages.ts';

/** The schema offered for a tool that declares no `parameters`, or `{}`. */
export const EMPTY_PARAMETERS = { type: 'object', properties: {} } as const;

/**
 * Converts the client-side tools of a request into an AI SDK `ToolSet`.
 *
 * The tools have no `execute`: tailgate never runs tools. The model's calls come back as
 * function_call items and the client posts the outputs as the next turn's input. The JSON
 * schema is passed through unvalidated (no `validate`), so a call whose arguments do not match
 * the schema is still returned to the client, who owns the tool.
 *
 * `lastToolOptions` go on the tool the provider receives last (e.g. Anthropic's cache breakpoint,
 * which then caches every tool definition).
 */
export function convertToToolSet(tools: readonly Tool[], lastToolOptions?: ProviderOptions): ToolSet {
  const toolSet: ToolSet = {};
  for (const offered of tools) {
    toolSet[offered.name] = tool({
      ...(offered.description !== undefined ? { description: offered.description } : {}),
      inputSchema: jsonSchema(
        offered.parameters && Object.keys(offered.parameters).length > 0 ? offered.parameters : EMPTY_PARAMETERS,
      ),
      // `strict: false` is the providers' default: left out, as the Responses facade leaves it out.
      ...(offered.strict ? { strict: true } : {}),
    });
  }
  // The SDK sends the tools in Object.entries order (a repeated name keeps its first position).
  const lastSent = Object.keys(toolSet).at(-1);
  if (lastToolOptions && lastSent !== undefined) {
    toolSet[lastSent] = { ...toolSet[lastSent]!, providerOptions: lastToolOptions };
  }
  return toolSet;
}
