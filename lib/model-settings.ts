import { z } from 'zod';
import { MODEL_PROVIDERS } from './defaults.ts';
import { NotConfiguredError } from './errors.ts';
import { priceTable, type ModelPrices } from './ledger/prices.ts';

/** The model settings of the environment (lib/config.ts): model ids, MODEL_ALIASES, MODEL_PRICES. */

/**
 * A model id a setting names (DEFAULT_MODEL, SUMMARY_MODEL): `echo`, or `<provider>:<model>` of
 * a known provider (lib/models/resolve-model.ts), refused at startup rather than on every
 * request that falls back to it. A provider's key is checked when the model is used.
 */
const MODEL_PROVIDER_NAMES = MODEL_PROVIDERS.filter((provider) => provider !== 'echo');
const MODEL_ID_RULE = `must be echo or <provider>:<model>, the provider one of ${MODEL_PROVIDER_NAMES.join(', ')}`;
export const modelIdSchema = z.string().refine(
  (id) => {
    const colon = id.indexOf(':');
    const provider = colon > 0 ? id.slice(0, colon) : '';
    return (
      id === 'echo' ||
      (MODEL_PROVIDER_NAMES.some((known) => known === provider) && /^\S{1,256}$/.test(id.slice(colon + 1)))
    );
  },
  { message: MODEL_ID_RULE },
);

/**
 * `gpt-4.1-mini=openai:gpt-4.1-mini, claude=anthropic:claude-sonnet-4-5` -> a map. A pair
 * without `=`, an empty side or a name given twice is `not_configured` naming MODEL_ALIASES.
 *
 * @example parseModelAliases('claude=anthropic:claude-sonnet-4-5') // { claude: 'anthropic:claude-sonnet-4-5' }
 */
export function parseModelAliases(text: string | undefined): Record<string, string> {
  const aliases: Record<string, string> = {};
  if (text === undefined) return aliases;
  for (const pair of text.split(',')) {
    if (pair.trim() === '') continue;
    const equals = pair.indexOf('=');
    const name = equals > 0 ? pair.slice(0, equals).trim() : '';
    const target = equals > 0 ? pair.slice(equals + 1).trim() : '';
    if (name === '' || target === '' || Object.hasOwn(aliases, name)) {
      throw new NotConfiguredError(
        `invalid setting MODEL_ALIASES: "${pair.trim()}" is not a new name=provider:model pair`,
        { variable: 'MODEL_ALIASES' },
      );
    }
    if (!modelIdSchema.safeParse(target).success) {
      throw new NotConfiguredError(`invalid setting MODEL_ALIASES: "${pair.trim()}": ${target} ${MODEL_ID_RULE}`, {
        variable: 'MODEL_ALIASES',
      });
    }
    aliases[name] = target;
  }
  return aliases;
}

/** MODEL_PRICES over the default prices; a bad one is `not_configured` naming it. */
export function parseModelPrices(text: string | undefined): ModelPrices {
  try {
    const prices = priceTable(text);
    // Prices are looked up by the model id (after MODEL_ALIASES): any other key is never read.
    const unread = Object.keys(prices).find((id) => !modelIdSchema.safeParse(id).success);
    if (unread !== undefined) throw new Error(`${unread}: not a model id: ${MODEL_ID_RULE} (after MODEL_ALIASES)`);
    return prices;
  } catch (error) {
    throw new NotConfiguredError(`invalid setting MODEL_PRICES: ${(error as Error).message}`, {
      variable: 'MODEL_PRICES',
    });
  }
}
