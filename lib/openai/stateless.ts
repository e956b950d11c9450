import type { Item, PromptItem, Tool } from '../items.ts';
import { inlineAttachments } from '../session/attachments.ts';
import type { ModelOutputItem, ModelRequest, ModelResult, ModelSettings } from '../models/model.ts';
import { checkPromptFits, truncatePrompt } from '../compaction/index.ts';
import { preparePrompt, resolveStrategyConfig } from '../strategies/index.ts';
import { resolveTokenBudget } from '../tokens/model-limits.ts';
import { turnUsage } from '../ledger/usage.ts';
import { afterResponse } from '../turn/append.ts';
import { promptCharacters, resolveStrategyNames, type TurnContext, type TurnServices } from '../turn.ts';

/**
 * A model call that stores nothing (`store: false` responses): the strategies run on the
 * items the request sent (the deployment's list, PROMPT_STRATEGY or the default), the
 * instructions go first, and the model answers. There is no session to compact; `inbox`
 * appends the notices the caller consumed (none unless a chat completion names a session).
 */
export interface StatelessRequest {
  items: Item[];
  instructions: string | null;
  tools: Tool[];
  model: string;
  strategies?: string | string[];
  maxOutputTokens?: number;
  temperature?: number;
  promptCacheKey?: string;
  /** What the client asked of the model call besides the prompt (lib/models/model.ts ModelSettings). */
  settings?: ModelSettings;
  /** `auto`: drop the oldest items until the prompt fits the model's window (else context_too_large). */
  truncation?: 'auto' | 'disabled';
  /** Inbox notices consumed for this call (chat completions naming a session): the `inbox` strategy appends them. */
  notices?: { name: string; content: string }[];
}

export type StatelessEvent = { type: 'text_delta'; delta: string } | { type: 'item_done'; item: ModelOutputItem };

export async function runStateless(
  services: Pick<TurnServices, 'env' | 'model' | 'tokenEncoders' | 'config' | 'tokenSpend' | 'background'>,
  request: StatelessRequest,
  emit?: (event: StatelessEvent) => void,
): Promise<ModelResult & { context: TurnContext }> {
  const model = services.model(request.model);
  // A budgeted token's spend: with no session read to overlap, its read comes first.
  const spend = services.tokenSpend;
  if (spend) spend.check(await spend.read());
  const strategies = resolveStrategyNames(request.strategies, services.env);
  // Numbered like a history, so the strategies can tell calls and outputs apart by position.
  const items = inlineAttachments(request.items, services.config);
  const history: PromptItem[] = items.map((item, index) => ({ ...item, seq: index + 1 }));
  const notices = request.notices ?? [];
  const config = resolveStrategyConfig({ env: services.env });
  const prepared = preparePrompt(history, strategies, {
    config,
    env: services.env,
    inbox: (items) => [
      ...items,
      ...notices.map(
        (notice): PromptItem => ({ type: 'message', role: 'user', content: notice.content, synthetic: 'inbox' }),
      ),
    ],
  });
  let prompt: PromptItem[] = request.instructions
    ? [{ type: 'message', role: 'system', content: request.instructions }, ...prepared.items]
    : prepared.items;
  // As a stored turn: a model with a known window never gets a prompt that must fail.
  const budget = resolveTokenBudget(model.id, config, {
    ...(request.maxOutputTokens !== undefined ? { maxOutputTokens: request.maxOutputTokens } : {}),
    ...(services.tokenEncoders ? { encoders: services.tokenEncoders } : {}),
  });
  let truncation: TurnContext['truncation'];
  if (Number.isFinite(budget.promptLimit)) {
    if (request.truncation === 'auto') {
      const cut = truncatePrompt(prompt, request.tools, budget);
      prompt = cut.prompt;
      truncation = cut.truncation;
    } else checkPromptFits(prompt, request.tools, budget);
  }
  const modelRequest: ModelRequest = {
    prompt,
    tools: request.tools,
    ...(request.maxOutputTokens !== undefined ? { maxOutputTokens: request.maxOutputTokens } : {}),
    ...(request.temperature !== undefined ? { temperature: request.temperature } : {}),
    ...(request.promptCacheKey !== undefined ? { promptCacheKey: request.promptCacheKey } : {}),
    ...(request.settings !== undefined ? { settings: request.settings } : {}),
  };
  let result: ModelResult | undefined;
  if (emit) {
    for await (const event of model.stream(modelRequest)) {
      if (event.type === 'done') result = event.result;
      else if (event.type === 'text_delta') emit({ type: 'text_delta', delta: event.delta });
      else emit({ type: 'item_done', item: event.item });
    }
  } else result = await model.generate(modelRequest);
  if (!result) throw new Error('the model stream ended without a result');
  if (spend) {
    const usage = turnUsage(result.usage, services.config.modelPrices[model.id]);
    afterResponse(services, () => spend.charge(usage));
  }
  const context: TurnContext = {
    strategies: prepared.strategies,
    items_in_prompt: prompt.length,
    prompt_chars: promptCharacters(prompt),
    ...prepared.stats,
    notices_delivered: notices.map((notice) => notice.name),
    ...(truncation ? { truncation } : {}),
  };
  return { ...result, context };
}
