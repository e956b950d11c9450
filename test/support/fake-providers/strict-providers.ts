import { anthropicStreamOf } from './anthropic-stream.ts';
import { startFakeProvider, type FakeProvider, type FakeReply, type RecordedRequest } from './fake-provider-server.ts';

/**
 * Fake Anthropic Messages and OpenAI Chat Completions servers that refuse, with the provider's
 * own 400 (its status, error shape and message), the requests the real ones refuse that a
 * session's history can lead to; every request is recorded with the refusal it got, if any.
 * What they answer otherwise is scripted from the request: a new user message with tools
 * offered that asks a question (ends with `?`) gets two parallel calls (with thinking first when
 * thinking is on), anything else text.
 */
export interface StrictProvider extends FakeProvider {
  /** The refusal of each recorded request, by index: undefined when it was accepted. */
  refusals: (string | undefined)[];
}

const ANTHROPIC_ID = /^[a-zA-Z0-9_-]+$/;
const ANTHROPIC_IMAGE_TYPES = ['image/jpeg', 'image/png', 'image/gif', 'image/webp'];
const blocksOf = (content: unknown): any[] =>
  typeof content === 'string' ? [{ type: 'text', text: content }] : (content as any[]);
/** Whether a user message's last block asks a question: the fakes answer one with two parallel calls. */
const asks = (block: any): boolean => block?.type === 'text' && block.text.trim().endsWith('?');

/** What the Messages API answers 400 for in `body`, given the signatures it issued. */
export function anthropicRefusal(body: any, issued: Map<string, string>): string | undefined {
  const messages: any[] = body.messages ?? [];
  let marks = [...(body.tools ?? []), ...(Array.isArray(body.system) ? body.system : [])].filter(
    (block) => block.cache_control,
  ).length;
  for (const [index, message] of messages.entries()) {
    const blocks = blocksOf(message.content);
    if (blocks.length === 0 && index !== messages.length - 1)
      return (
        `messages.${index}: all messages must have non-empty content ` +
        'except for the optional final assistant message'
      );
    const next = messages[index + 1];
    const leading: string[] = [];
    for (const block of next?.role === 'user' ? blocksOf(next.content) : []) {
      if (block.type !== 'tool_result') break;
      leading.push(block.tool_use_id);
    }
    const previousUses =
      index > 0 && messages[index - 1].role === 'assistant'
        ? blocksOf(messages[index - 1].content)
            .filter((block) => block.type === 'tool_use')
            .map((block) => block.id)
        : [];
    for (const [at, block] of blocks.entries()) {
      if (block.cache_control) marks++;
      const where = `messages.${index}.content.${at}`;
      // A tool_result's string content is one text block (an empty one none).
      const inner = block.type !== 'tool_result' ? [block] : block.content === '' ? [] : blocksOf(block.content ?? []);
      for (const part of inner) {
        if (part.type === 'text' && part.text.trim() === '')
          return 'messages: text content blocks must contain non-whitespace text';
        if (
          part.type === 'image' &&
          part.source?.type === 'base64' &&
          !ANTHROPIC_IMAGE_TYPES.includes(part.source.media_type)
        )
          return (
            `${where}.image.source.base64.media_type: ` +
            "Input should be 'image/jpeg', 'image/png', 'image/gif' or 'image/webp'"
          );
      }
      if (block.type === 'tool_use' && !ANTHROPIC_ID.test(block.id))
        return `${where}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'`;
      if (block.type === 'tool_result' && !previousUses.includes(block.tool_use_id))
        return (
          `${where}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${block.tool_use_id}. ` +
          'Each `tool_result` block must have a corresponding `tool_use` block in the previous message.'
        );
      if (
        (block.type === 'thinking' && issued.get(block.signature) !== block.thinking) ||
        block.type === 'redacted_thinking'
      )
        return `${where}: Invalid \`signature\` in \`thinking\` block`;
    }
    if (message.role !== 'assistant') continue;
    const unanswered = blocks.filter((block) => block.type === 'tool_use' && !leading.includes(block.id));
    if (unanswered.length > 0 && index !== messages.length - 1)
      return (
        `messages.${index}: \`tool_use\` ids were found without \`tool_result\` blocks immediately after: ` +
        `${unanswered.map((block) => block.id).join(', ')}. ` +
        'Each `tool_use` block must have a corresponding `tool_result` block in the next message.'
      );
  }
  if (marks > 4) return `A maximum of 4 blocks with cache_control may be provided. Found ${marks}.`;
  // With thinking on, a tool loop's last assistant message starts with thinking.
  const lastUser = messages.at(-1);
  const loop = lastUser && blocksOf(lastUser.content).some((block) => block.type === 'tool_result');
  const assistant = messages.at(-2);
  const first = assistant && blocksOf(assistant.content)[0];
  if (body.thinking?.type === 'enabled' && loop && first && !['thinking', 'redacted_thinking'].includes(first.type))
    return (
      `messages.${messages.length - 2}.content.0.type: Expected \`thinking\` or \`redacted_thinking\`, ` +
      `but found \`${first.type}\`. When \`thinking\` is enabled, a final \`assistant\` message must start ` +
      'with a thinking block (preceeding the lastmost set of `tool_use` and `tool_result` blocks).'
    );
  return undefined;
}

const OPENAI_PARTS: Record<string, string[]> = {
  system: ['text'],
  developer: ['text'],
  user: ['text', 'image_url', 'input_audio', 'file'],
  assistant: ['text', 'refusal'],
  tool: ['text'],
};

/** What Chat Completions answers 400 for in `body`: [message, param]. */
export function openaiRefusal(body: any): [string, string] | undefined {
  const tools: unknown[] = body.tools ?? [];
  if (tools.length > 128)
    return [
      "Invalid 'tools': array too long. Expected an array with maximum length 128, " +
        `but got an array with length ${tools.length} instead.`,
      'tools',
    ];
  const messages: any[] = body.messages;
  for (const [index, message] of messages.entries()) {
    if (Array.isArray(message.content))
      for (const [at, part] of message.content.entries())
        if (!OPENAI_PARTS[message.role]?.includes(part.type))
          return [
            `Invalid value: '${part.type}'. Supported values are: ` +
              `${OPENAI_PARTS[message.role]!.map((type) => `'${type}'`).join(' and ')}.`,
            `messages[${index}].content[${at}].type`,
          ];
    for (const [at, call] of (message.tool_calls ?? []).entries())
      if (call.id.length > 40)
        return [
          `Invalid 'messages[${index}].tool_calls[${at}].id': string too long. Expected a string with ` +
            `maximum length 40, but got a string with length ${call.id.length} instead.`,
          `messages[${index}].tool_calls[${at}].id`,
        ];
    if (message.role === 'tool') {
      let back = index - 1;
      while (messages[back]?.role === 'tool') back--;
      const calls = (messages[back]?.tool_calls ?? []).map((call: any) => call.id);
      if (!calls.includes(message.tool_call_id))
        return [
          "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
          `messages.[${index}].role`,
        ];
    }
    if (message.role === 'assistant' && message.tool_calls) {
      const open = new Set<string>(message.tool_calls.map((call: any) => call.id));
      for (let next = index + 1; messages[next]?.role === 'tool'; next++) open.delete(messages[next].tool_call_id);
      if (open.size > 0)
        return [
          "An assistant message with 'tool_calls' must be followed by tool messages responding to each " +
            "'tool_call_id'. The following tool_call_ids did not have response messages: " +
            [...open].join(', '),
          `messages.[${index}].role`,
        ];
    }
  }
  return undefined;
}

/** A fake Messages API: thinking signatures it did not issue itself are refused. */
export async function startStrictAnthropic(): Promise<StrictProvider> {
  const issued = new Map<string, string>();
  const refusals: (string | undefined)[] = [];
  let answered = 0;
  const provider = await startFakeProvider((request) => {
    const refusal = anthropicRefusal(request.body, issued);
    refusals.push(refusal);
    if (refusal)
      return { status: 400, json: { type: 'error', error: { type: 'invalid_request_error', message: refusal } } };
    const n = ++answered;
    const last = blocksOf(request.body.messages.at(-1).content);
    const content: any[] = [];
    if (request.body.tools?.length && asks(last.at(-1))) {
      if (request.body.thinking?.type === 'enabled') {
        const thinking = `Thought ${n}: I should look both places up.`;
        const signature = `sig${n}${Buffer.from(thinking).toString('base64')}`;
        issued.set(signature, thinking);
        content.push({ type: 'thinking', thinking, signature });
      }
      const name = request.body.tools[0].name;
      for (const place of ['Paris', 'Rome'])
        content.push({ type: 'tool_use', id: `toolu_0${n}${place}`, name, input: { location: `${place} #${n}` } });
    } else content.push({ type: 'text', text: `Answer ${n} from Claude.` });
    const message = {
      id: `msg_0${n}`,
      type: 'message',
      role: 'assistant',
      model: request.body.model,
      content,
      stop_reason: content.at(-1).type === 'tool_use' ? 'tool_use' : 'end_turn',
      stop_sequence: null,
      usage: { input_tokens: 100, cache_creation_input_tokens: 0, cache_read_input_tokens: 0, output_tokens: 20 },
    };
    return request.body.stream ? { sse: anthropicStreamOf(JSON.stringify(message)) } : { json: message };
  });
  return Object.assign(provider, { refusals });
}

/**
 * A fake Chat Completions server; `callId` names its n-th call's ids (a Kimi-style backend's
 * `functions.get_weather:0`), `reasoning` adds DeepSeek-style `reasoning_content`.
 */
export async function startStrictOpenAI(
  callId: (n: number, index: number) => string,
  reasoning = false,
): Promise<StrictProvider> {
  const refusals: (string | undefined)[] = [];
  let answered = 0;
  const provider = await startFakeProvider((request: RecordedRequest): FakeReply => {
    const refusal = openaiRefusal(request.body);
    refusals.push(refusal?.[0]);
    if (refusal)
      return {
        status: 400,
        json: { error: { message: refusal[0], type: 'invalid_request_error', param: refusal[1], code: null } },
      };
    const n = ++answered;
    const last = request.body.messages.at(-1);
    const message: any = { role: 'assistant', content: null };
    if (reasoning) message.reasoning_content = `Reasoning ${n}.`;
    if (request.body.tools?.length && last.role === 'user' && asks(blocksOf(last.content).at(-1)))
      message.tool_calls = ['Paris', 'Rome'].map((place, index) => ({
        id: callId(n, index),
        type: 'function',
        function: {
          name: request.body.tools[0].function.name,
          arguments: JSON.stringify({ location: `${place} #${n}` }),
        },
      }));
    else message.content = `Answer ${n} from ${request.body.model}.`;
    const usage = { prompt_tokens: 100, completion_tokens: 20, total_tokens: 120 };
    const finish_reason = message.tool_calls ? 'tool_calls' : 'stop';
    const base = { id: `chatcmpl-${n}`, created: 1727731234, model: request.body.model };
    if (!request.body.stream)
      return {
        json: { ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason }], usage },
      };
    const chunk = (delta: object, finish: string | null, extra = {}) => {
      const choices = [{ index: 0, delta, finish_reason: finish }];
      return `data: ${JSON.stringify({ ...base, object: 'chat.completion.chunk', choices, ...extra })}\n\n`;
    };
    const tool_calls = message.tool_calls?.map((call: any, index: number) => ({ index, ...call }));
    const delta = {
      role: 'assistant',
      content: message.content,
      reasoning_content: message.reasoning_content,
      tool_calls,
    };
    return {
      sse: `${chunk(delta, null)}${chunk({}, finish_reason)}${chunk({}, null, { choices: [], usage })}data: [DONE]\n\n`,
    };
  });
  return Object.assign(provider, { refusals });
}
