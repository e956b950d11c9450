import type { Tool } from '../items.ts';
import type { ModelSettings } from '../models/model.ts';
import { InvalidRequestError, TailgateError } from '../errors.ts';
import { bracketedField, pathDetails } from '../field-path.ts';
import { callsNone, checkToolChoice, modelToolChoice } from './tool-choice.ts';
import { OpenAIApiError } from './errors.ts';
import { modelOf, type Facade } from './facade.ts';
import { modelName } from './models.ts';
import { inputToItems, type InputItemBody, type RequestInput } from './request-input.ts';
import { DEFAULT_SETTINGS, type ResponseFields, type ResponseSettings } from './responses.ts';
import type { ResponseCreateBody } from './schemas.ts';

/**
 * A Responses request mapped to tailgate: its model, items and tools, and the fields every
 * answer to it echoes.
 */

/** What a request asks, mapped to tailgate: its model, items, tools and the fields every answer echoes. */
export interface PreparedRequest extends Omit<RequestInput, 'instructions'> {
  body: ResponseCreateBody;
  /** The position in the request's own input of each entry of `body.input` (item references resolved). */
  origins: readonly number[];
  /**
   * The tailgate model id `model` names; undefined when none was sent: the conversation's model
   * (a new one, or `store: false`: DEFAULT_MODEL), as a native turn without one runs.
   */
  model: string | undefined;
  instructions: string | null;
  /**
   * What the request makes of its conversation's instructions (tailgate keeps one system prompt):
   * its own, null to clear them (`instructions` sent as "" or null, and no system or developer
   * message with text), or undefined to keep them (none sent).
   */
  sessionInstructions: string | null | undefined;
  tools: Tool[] | undefined;
  /** The tools the model gets (none with tool_choice `none`). */
  turnTools: Tool[] | undefined;
  /** What the model call gets of the request's settings. */
  modelSettings: ModelSettings;
  /** What every answer echoes; `model` undefined when none was sent (the model it ran: echoedModel). */
  echo: Pick<ResponseFields, 'instructions' | 'previousResponseId' | 'settings'> & { model: string | undefined };
}

function toTools(tools: ResponseCreateBody['tools']): Tool[] | undefined {
  return tools?.map((tool) => ({
    type: 'function' as const,
    name: tool.name,
    ...(tool.description ? { description: tool.description } : {}),
    ...(tool.parameters ? { parameters: tool.parameters } : {}),
    ...(tool.strict ? { strict: true } : {}),
  }));
}

/** `body`'s input with its item references resolved (lib/openai/item-references.ts). */
export function prepareResponseRequest(
  facade: Facade,
  body: Omit<ResponseCreateBody, 'input'> & { input: string | InputItemBody[] },
  /** The position in the request's own input of each entry of `body.input` (references resolved); default the same. */
  origins?: readonly number[],
): PreparedRequest {
  const inputOrigins = origins ?? (typeof body.input === 'string' ? [0] : body.input.map((_, index) => index));
  const origin = (index: number) => inputOrigins[index] ?? index;
  const model = body.model ? modelOf(facade, body.model) : undefined;
  const {
    instructions: inputInstructions,
    items,
    history,
    compactedAt,
    anchor,
    compactions,
    positions,
  } = inputInRequest(() => inputToItems(body.input), inputOrigins);
  const instructions =
    [body.instructions ?? '', ...inputInstructions].filter((text) => text !== '').join('\n\n') || null;
  facade.checkItems(items, 'input', positions.items.map(origin));
  // An empty array: a count of a stored conversation's next turn without input (./input-tokens.ts).
  if (items.length === 0 && !(Array.isArray(body.input) && body.input.length === 0))
    throw new OpenAIApiError(400, 'invalid_request', 'input holds no user, assistant or tool items', 'input');
  const tools = toTools(body.tools);
  const choice = body.tool_choice;
  // Without tools a stored response offers its conversation's (lib/openai/create-response.ts checks those).
  if (tools !== undefined) checkToolChoice(choice, tools, 'tools');
  else if (body.store === false) checkToolChoice(choice, [], 'tools (none was sent)');
  return {
    body,
    origins: inputOrigins,
    model,
    instructions,
    sessionInstructions: instructions ?? (body.instructions === undefined ? undefined : null),
    items,
    history,
    compactedAt,
    ...(anchor ? { anchor } : {}),
    compactions,
    positions: { items: positions.items.map(origin), history: positions.history.map(origin) },
    tools,
    turnTools: callsNone(choice) ? [] : tools,
    modelSettings: modelSettingsOf(body),
    echo: {
      model: body.model ?? undefined,
      instructions,
      previousResponseId: body.previous_response_id ?? null,
      settings: echoedSettings(body),
    },
  };
}

/**
 * The `model` a response echoes: the name the request sent, else the MODEL_ALIASES name (or id)
 * of the model it ran, its conversation's (`sessionModel`) or DEFAULT_MODEL.
 */
export function echoedModel(facade: Facade, prepared: PreparedRequest, sessionModel?: string | null): string {
  return prepared.echo.model ?? modelName(facade.config, sessionModel ?? facade.config.defaultModel);
}

/** What the model call gets of the request: each setting that was sent (lib/models/model.ts). */
function modelSettingsOf(body: ResponseCreateBody): ModelSettings {
  const format = body.text?.format;
  return withoutUnset({
    topP: body.top_p,
    presencePenalty: body.presence_penalty,
    frequencyPenalty: body.frequency_penalty,
    ...modelToolChoice(body.tool_choice),
    reasoningEffort: body.reasoning?.effort,
    verbosity: body.text?.verbosity,
    parallelToolCalls: body.parallel_tool_calls,
    user: body.user,
    safetyIdentifier: body.safety_identifier,
    promptCacheRetention: body.prompt_cache_retention,
    promptCacheTtl: body.prompt_cache_options?.ttl as ModelSettings['promptCacheTtl'],
    logprobs: body.include?.includes('message.output_text.logprobs') ? (body.top_logprobs ?? 0) : undefined,
    responseFormat: format?.type === 'text' ? undefined : format,
  });
}

type Unset<T> = { [K in keyof T]?: T[K] | null | undefined };

/** `settings` without the fields that were not sent (undefined or null), as ModelSettings takes them. */
export function withoutUnset(settings: Unset<ModelSettings>): ModelSettings {
  return Object.fromEntries(
    Object.entries(settings).filter(([, value]) => value !== undefined && value !== null),
  ) as ModelSettings;
}

/** The settings a response to `body` echoes: each value received, else the default (DEFAULT_SETTINGS). */
function echoedSettings(body: ResponseCreateBody): ResponseSettings {
  const pick = <Key extends keyof ResponseSettings>(key: Key, value: ResponseSettings[Key] | null | undefined) =>
    value === undefined || value === null ? DEFAULT_SETTINGS[key] : value;
  const reasoning = body.reasoning;
  return {
    temperature: pick('temperature', body.temperature),
    top_p: pick('top_p', body.top_p),
    presence_penalty: pick('presence_penalty', body.presence_penalty),
    frequency_penalty: pick('frequency_penalty', body.frequency_penalty),
    top_logprobs: pick('top_logprobs', body.top_logprobs),
    // As sent: an allowed_tools `mode` "none" (the specification's) is not in the SDK's type.
    tool_choice: pick('tool_choice', body.tool_choice as ResponseSettings['tool_choice']),
    parallel_tool_calls: pick('parallel_tool_calls', body.parallel_tool_calls),
    max_tool_calls: pick('max_tool_calls', body.max_tool_calls),
    max_output_tokens: pick('max_output_tokens', body.max_output_tokens),
    text: {
      format: echoedFormat(body.text?.format),
      verbosity: body.text?.verbosity ?? DEFAULT_SETTINGS.text.verbosity!,
    },
    reasoning: reasoning ? echoedReasoning(reasoning) : DEFAULT_SETTINGS.reasoning,
    service_tier: pick('service_tier', body.service_tier),
    user: pick('user', body.user),
    safety_identifier: pick('safety_identifier', body.safety_identifier),
    prompt_cache_key: pick('prompt_cache_key', body.prompt_cache_key),
    truncation: pick('truncation', body.truncation),
    metadata: pick('metadata', body.metadata),
  };
}

/**
 * The `reasoning` a response echoes: the effort and summary sent, and the mode and context the
 * call ran with, as OpenAI answers them (the effective ones), when they were sent: every call
 * runs in the standard mode, and gets the reasoning of its current tool loop alone
 * (lib/models/convert-to-model-messages.ts), whatever was asked.
 */
function echoedReasoning(reasoning: NonNullable<ResponseCreateBody['reasoning']>): ResponseSettings['reasoning'] {
  return {
    effort: reasoning.effort ?? null,
    summary: reasoning.summary ?? reasoning.generate_summary ?? null,
    ...(typeof reasoning.mode === 'string' ? { mode: 'standard' } : {}),
    ...(typeof reasoning.context === 'string' ? { context: 'current_turn' as const } : {}),
  };
}

/**
 * The text format a response echoes: as sent, a `json_schema` one with `description` and
 * `strict` (the specification requires both; OpenAI's default for `strict` is false).
 */
function echoedFormat(
  format: NonNullable<ResponseCreateBody['text']>['format'],
): NonNullable<ResponseSettings['text']['format']> {
  if (format?.type !== 'json_schema') return format ?? { type: 'text' };
  return { ...format, description: format.description ?? null, strict: format.strict ?? false } as NonNullable<
    ResponseSettings['text']['format']
  >;
}

/**
 * A refusal naming an item of a turn's input by its position among the items stored
 * (`input.<i>.call_id`, lib/session/log/open-calls.ts) names it again by its position in the
 * request's `input` (a conversation's `items`; `positions`, one per item stored); any other
 * error is answered as it is.
 * So does one naming an entry of the input with its item references resolved (`positions`: the
 * request's position of each entry, PreparedRequest.origins), which a superseded compaction's
 * reference left out may have shifted.
 */
export function namedInRequest(
  error: unknown,
  positions: readonly number[],
  /** The request's field that holds the items: `input`, or a conversation's `items`. */
  name: 'input' | 'items' = 'input',
): unknown {
  const part = partInRequest(error, positions, name);
  if (part) return part;
  if (!(error instanceof InvalidRequestError)) return error;
  const details = (error.details ?? {}) as { field?: unknown };
  const named = typeof details.field === 'string' ? /^input\.(\d+)(\..*)$/.exec(details.field) : null;
  const position = named ? positions[Number(named[1])] : undefined;
  if (!named || position === undefined) return error;
  const field = `${name}.${position}${named[2]}`;
  const message = error.message.replace(named[0], field).replace(`input[${named[1]}]`, `${name}[${position}]`);
  // The copy keeps which of the path's segments of digits are keys (lib/field-path.ts).
  const bracketed = (bracketedField(details) ?? '').replace(`input[${named[1]}]`, `${name}[${position}]`);
  return new InvalidRequestError(message, pathDetails({ ...details, field }, bracketed));
}

/**
 * A refused image or file part, which lib/session/attachments.ts names by its item's position
 * among the items stored (`details.part`: `items[1].content[0]`, a turn's `input[1].content[0]`),
 * named by its position in the request's `input` (`input[2].content[0]`; a chat completion's:
 * `messages`), in the message, `details.part` and `details.field` (so `param`); the same code and
 * status (400 or 413). Null for any other error.
 */
export function partInRequest(
  error: unknown,
  positions: readonly number[],
  name: 'input' | 'items' | 'messages' = 'input',
): TailgateError | null {
  if (!(error instanceof TailgateError)) return null;
  const details = (error.details ?? {}) as { part?: unknown };
  const named =
    typeof details.part === 'string' ? /^(?:items|input)\[(\d+)\]((?:\.\w+\[\d+\])*)$/.exec(details.part) : null;
  const position = named ? positions[Number(named[1])] : undefined;
  if (!named || position === undefined) return null;
  const part = `${name}[${position}]${named[2]}`;
  const field = `${name}.${position}${named[2]!.replaceAll(/\[(\d+)\]/g, '.$1')}`;
  return new TailgateError(error.code, error.message.replace(named[0], part), { ...details, part, field });
}

/**
 * `read()`, its refusal naming an input entry by its position in the request's `input` (or a
 * conversation's `items`: `name`; see namedInRequest).
 */
export function inputInRequest<T>(read: () => T, origins: readonly number[], name: 'input' | 'items' = 'input'): T {
  try {
    return read();
  } catch (error) {
    throw namedInRequest(error, origins, name);
  }
}
