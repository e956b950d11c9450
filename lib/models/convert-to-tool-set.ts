import { jsonSchema, tool, type ToolSet } from 'ai';
import type { Tool } from '../items.ts';

/** The schema offered for a tool that declares no `parameters`. */
export const EMPTY_PARAMETERS = { type: 'object', properties: {} } as const;

/**
 * Converts the client-side tools of a request into an AI SDK `ToolSet`.
 *
 * The tools have no `execute`: tailgate never runs tools. The model's calls come back as
 * function_call items and the client posts the outputs as the next turn's input. The JSON
 * schema is passed through unvalidated (no `validate`), so a call whose arguments do not match
 * the schema is still returned to the client, who owns the tool.
 */
export function convertToToolSet(tools: Tool[]): ToolSet {
  const toolSet: ToolSet = {};
  for (const offered of tools) {
    toolSet[offered.name] = tool({
      ...(offered.description !== undefined ? { description: offered.description } : {}),
      inputSchema: jsonSchema(offered.parameters ?? EMPTY_PARAMETERS),
    });
  }
  return toolSet;
}
