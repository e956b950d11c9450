import type { ClientItem, Tool } from '../items.ts';
import { OpenAIApiError } from './errors.ts';
import { modelOf, type Facade } from './facade.ts';
import { inputToItems, type ResponseFields } from './responses.ts';
import type { ResponseCreateBody } from './schemas.ts';

/**
 * A Responses request mapped to tailgate: its model, items and tools, and the fields every
 * answer to it echoes.
 */

/** What a request asks, mapped to tailgate: its model, items, tools and the fields every answer echoes. */
export interface PreparedRequest {
  body: ResponseCreateBody;
  model: string;
  instructions: string | null;
  items: ClientItem[];
  tools: Tool[] | undefined;
  /** The tools the model gets (none with tool_choice `none`). */
  turnTools: Tool[] | undefined;
  echo: Omit<ResponseFields, 'id' | 'status' | 'output' | 'createdAt' | 'tools' | 'conversationId' | 'store'>;
}

function toTools(tools: ResponseCreateBody['tools']): Tool[] | undefined {
  return tools?.map((tool) => ({
    type: 'function' as const,
    name: tool.name,
    ...(tool.description ? { description: tool.description } : {}),
    ...(tool.parameters ? { parameters: tool.parameters } : {}),
  }));
}

export function prepareResponseRequest(facade: Facade, body: ResponseCreateBody): PreparedRequest {
  const model = modelOf(facade, body.model);
  const { instructions: inputInstructions, items } = inputToItems(body.input);
  const instructions =
    [body.instructions ?? '', ...inputInstructions].filter((text) => text !== '').join('\n\n') || null;
  facade.checkItems(items);
  if (items.length === 0)
    throw new OpenAIApiError(400, 'invalid_request', 'input holds no user, assistant or tool items', 'input');
  const tools = toTools(body.tools);
  return {
    body,
    model,
    instructions,
    items,
    tools,
    turnTools: body.tool_choice === 'none' ? [] : tools,
    echo: {
      model: body.model,
      instructions,
      toolChoice: body.tool_choice ?? 'auto',
      temperature: body.temperature ?? null,
      maxOutputTokens: body.max_output_tokens ?? null,
      metadata: body.metadata ?? null,
      previousResponseId: body.previous_response_id ?? null,
      truncation: body.truncation ?? 'disabled',
    },
  };
}
