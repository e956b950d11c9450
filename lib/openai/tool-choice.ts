import { z } from 'zod';
import { InvalidRequestError } from '../errors.ts';
import { bracketPath } from '../field-path.ts';
import type { Tool } from '../items.ts';
import type { ModelSettings } from '../models/model.ts';

/**
 * A Responses request's `tool_choice`: `auto`, `none`, `required`, a named function, or
 * `allowed_tools` (OpenAI's and the Open Responses specification's): the model may call only
 * the listed tools, under `mode`, while every tool of `tools` stays offered, so the prompt's
 * tool list (and the provider's prompt cache) stays the same whatever subset a step allows.
 */
const namedFunction = z.object({ type: z.literal('function'), name: z.string().min(1).max(256) }).strict();

const allowedTools = z
  .object({
    type: z.literal('allowed_tools'),
    mode: z.enum(['auto', 'required', 'none']),
    tools: z
      .array(
        z
          .object({
            type: z.literal('function', {
              error: 'only function tools can be allowed (tailgate has no built-in tools)',
            }),
            name: z.string().min(1).max(256),
          })
          .strict(),
      )
      .min(1)
      .max(512),
  })
  .strict();

export const toolChoiceSchema = z
  .union(
    [
      z.enum(['auto', 'none', 'required']),
      z.discriminatedUnion('type', [namedFunction, allowedTools], {
        error: 'must be "auto", "none", "required", {type: "function", name} or {type: "allowed_tools", mode, tools}',
      }),
    ],
    { error: 'must be "auto", "none", "required", {type: "function", name} or {type: "allowed_tools", mode, tools}' },
  )
  .nullable()
  .optional();

export type ToolChoice = z.infer<typeof toolChoiceSchema>;

/**
 * A tool_choice naming a function must name one of the tools the turn offers (`offered`, which
 * the message calls `whose`), and so must each tool `allowed_tools` lists; `required` (or
 * `allowed_tools` in `required` mode) needs one offered (as OpenAI answers): else 400 naming
 * tool_choice. A TailgateError, so that a turn its claim refuses for it
 * (lib/openai/create-response.ts) is logged with its code.
 */
export function checkToolChoice(
  choice: ToolChoice,
  offered: readonly Tool[],
  whose: string,
  allowedField: (index: number) => string = (index) => `tool_choice.tools.${index}.name`,
): void {
  if (choice === 'required' && offered.length === 0)
    throw new InvalidRequestError(`tool_choice "required" needs a tool to call, and ${whose} holds none`, {
      field: 'tool_choice',
    });
  const names = new Set(offered.map((tool) => tool.name));
  const object = typeof choice === 'object' ? choice : null;
  if (object?.type === 'function' && !names.has(object.name))
    throw new InvalidRequestError(`tool_choice names ${object.name}, which is not in ${whose}`, {
      field: 'tool_choice',
    });
  if (object?.type !== 'allowed_tools') return;
  const missing = object.tools.findIndex((tool) => !names.has(tool.name));
  if (missing < 0) return;
  const field = allowedField(missing);
  throw new InvalidRequestError(
    `${bracketPath(field)}: tool_choice allows ${object.tools[missing]!.name}, which is not in ${whose}`,
    { field },
  );
}

/**
 * The check of a stored response's tool_choice, a create's and a count's alike: without tools of
 * its own (`tools` undefined) a turn offers its conversation's (`conversation`; a new one has none),
 * which the tool_choice must name. With tools, prepareResponseRequest checked it against those.
 */
export function checkOfferedToolChoice(
  request: { tools: readonly Tool[] | undefined; body: { tool_choice?: ToolChoice } },
  conversation?: { tools: readonly Tool[] },
): void {
  if (request.tools !== undefined) return;
  if (conversation) checkToolChoice(request.body.tool_choice, conversation.tools, "the conversation's tools");
  else checkToolChoice(request.body.tool_choice, [], 'tools (none was sent)');
}

/** The model call's `toolChoice` and `allowedTools` (lib/models/model.ts) of a request's tool_choice. */
export function modelToolChoice(choice: ToolChoice): Pick<ModelSettings, 'toolChoice' | 'allowedTools'> {
  if (choice === null || choice === undefined) return {};
  if (typeof choice === 'string') return { toolChoice: choice };
  if (choice.type === 'function') return { toolChoice: { name: choice.name } };
  if (choice.mode === 'none') return { toolChoice: 'none' };
  return { toolChoice: choice.mode, allowedTools: choice.tools.map((tool) => tool.name) };
}

/** Whether a tool_choice lets the model call no tool: the turn then offers none. */
export function callsNone(choice: ToolChoice): boolean {
  return (
    choice === 'none' || (typeof choice === 'object' && choice?.type === 'allowed_tools' && choice.mode === 'none')
  );
}

/**
 * A Chat Completions request's `tool_choice`: `auto`, `none`, `required`, `{type: "function",
 * function: {name}}`, or `{type: "allowed_tools", allowed_tools: {mode, tools}}` (each tool
 * `{type: "function", function: {name}}`), read as its Responses form (toolChoiceSchema).
 */
const chatFunction = z
  .object({ type: z.literal('function'), function: z.object({ name: z.string().min(1).max(256) }).strict() })
  .strict();

const chatAllowedTools = z
  .object({
    type: z.literal('allowed_tools'),
    allowed_tools: z
      .object({
        mode: z.enum(['auto', 'required']),
        tools: z
          .array(
            z
              .object({
                type: z.literal('function', {
                  error: 'only function tools can be allowed (tailgate has no custom tools)',
                }),
                function: z.object({ name: z.string().min(1).max(256) }).strict(),
              })
              .strict(),
          )
          .min(1)
          .max(512),
      })
      .strict(),
  })
  .strict();

const CHAT_CHOICES =
  'must be "auto", "none", "required", {type: "function", function: {name}} or ' +
  '{type: "allowed_tools", allowed_tools: {mode, tools}}';

export const chatToolChoiceSchema = z
  .union(
    [
      z.enum(['auto', 'none', 'required']),
      z.discriminatedUnion('type', [chatFunction, chatAllowedTools], { error: CHAT_CHOICES }),
    ],
    { error: CHAT_CHOICES },
  )
  .optional();

/** A chat `tool_choice` in its Responses form, which checkToolChoice and modelToolChoice take. */
export function fromChatToolChoice(choice: z.infer<typeof chatToolChoiceSchema>): ToolChoice {
  if (typeof choice !== 'object') return choice;
  if (choice.type === 'function') return { type: 'function', name: choice.function.name };
  const { mode, tools } = choice.allowed_tools;
  return { type: 'allowed_tools', mode, tools: tools.map((tool) => ({ type: 'function', name: tool.function.name })) };
}
