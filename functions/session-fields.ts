import { parseStrategyConfigLayer, resolveStrategyConfig } from '../lib/strategies/strategy-config.ts';
import { resolveStrategyNames, type TurnServices } from '../lib/turn/index.ts';
import type { SessionPatch } from '../lib/session/fields.ts';
import { utf8Bytes } from '../lib/session/item-size.ts';
import { InvalidRequestError, TailgateError } from '../lib/errors.ts';
import type { ServiceConfig } from '../lib/config.ts';
import { webhookUrlProblem } from '../lib/webhooks/url.ts';
import { refuseOverToolLimit, type Model } from '../lib/models/model.ts';
import type { Tool } from '../lib/items.ts';

/**
 * Session config as stored: `strategies` always an array of known names, `strategy_config`
 * checked key by key, so a bad value is refused when the session is written rather than on
 * its next turn. `null` stays `null` (the deployment default); absent stays absent.
 */
export function normalizeSessionFields(
  body: SessionPatch,
  services: Pick<TurnServices, 'env' | 'model' | 'config'>,
): SessionPatch & { strategies?: string[] | null | undefined } {
  checkFieldSize(
    'instructions',
    typeof body.instructions === 'string' ? utf8Bytes(body.instructions) : 0,
    services.config.maxInstructionsBytes,
    'MAX_INSTRUCTIONS_BYTES',
  );
  checkFieldSize(
    'metadata',
    body.metadata ? utf8Bytes(JSON.stringify(body.metadata)) : 0,
    services.config.maxMetadataBytes,
    'MAX_METADATA_BYTES',
  );
  // Every field passes as sent but the two normalized below, so a new field needs no line here.
  const { strategies: _strategies, strategy_config: _strategyConfig, ...rest } = body;
  const fields: SessionPatch & { strategies?: string[] | null } = rest;
  // An unknown model is refused now, not on the session's first turn.
  if (typeof body.model === 'string') services.model(body.model);
  if (typeof body.webhook_url === 'string') checkWebhookUrl(body.webhook_url, services.config);
  if (body.strategies !== undefined)
    fields.strategies =
      body.strategies === null ? null : resolveStrategyNames(body.strategies, services.env, 'strategies');
  if (body.strategy_config !== undefined) {
    fields.strategy_config =
      body.strategy_config === null
        ? null
        : (parseStrategyConfigLayer(body.strategy_config, 'session', 'body') as Record<string, number>);
    // Judged over the deployment's, as its turns will have it: a reserve must leave the prompt room.
    if (fields.strategy_config)
      resolveStrategyConfig({ env: services.env, session: fields.strategy_config, sent: 'session' });
  }
  return fields;
}

/**
 * What refuses a session's config (as it will be written: a create's, a PATCH's or a fork's over the
 * stored one) whose model, else the deployment's, takes fewer tools than it offers, as its turns'
 * claims would: a 400 naming `tools` when they were sent, else `model`. Judged only where either was
 * sent; a model that does not resolve (no key) is left to its turns.
 */
export function toolLimitCheck(
  services: { previewModel: (id: string) => Model; config: Pick<ServiceConfig, 'defaultModel'> },
  sent: { model?: string | null | undefined; tools?: readonly Tool[] | null | undefined },
): (config: { model?: string | null | undefined; tools?: readonly Tool[] | null | undefined }) => void {
  return (config) => {
    if (sent.model === undefined && sent.tools === undefined) return;
    let model: Model;
    try {
      model = services.previewModel(config.model ?? services.config.defaultModel);
    } catch {
      return;
    }
    refuseOverToolLimit(model, config.tools ?? [], undefined, sent.tools === undefined ? 'model' : 'tools');
  };
}

/** `instructions` and `metadata` above their configured sizes are refused with 413 naming the field. */
function checkFieldSize(field: string, size: number, limit: number, setting: string): void {
  if (size <= limit) return;
  throw new TailgateError(
    'payload_too_large',
    `body.${field} is ${size} bytes; at most ${limit} are allowed (${setting})`,
    { field, size, limit },
  );
}

/** A session's `webhook_url`: only where webhooks are signed, and only to an address they may go to. */
function checkWebhookUrl(url: string, config: ServiceConfig): void {
  const problem = config.webhooks
    ? webhookUrlProblem(url, config.webhooks.allowPrivate)
    : 'is not taken: this deployment sends no webhooks (WEBHOOK_SECRET is unset)';
  if (problem !== null) throw new InvalidRequestError(`body.webhook_url ${problem}`, { field: 'webhook_url' });
}
