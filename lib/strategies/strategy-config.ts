import { z } from 'zod';
import { InvalidRequestError } from '../errors.ts';
import { bracketSegments, pathDetails } from '../field-path.ts';
import { splitStrategyNames } from '../history.ts';
import { decimalNumber } from '../setting-values.ts';

const count = () => z.number().int().nonnegative();

/** Every key, without defaults: the shape of one layer. */
const strategyConfigShape = {
  // shorten_tools
  full_tool_calls: count(),
  full_tool_outputs: count(),
  max_tool_calls: count(),
  max_tool_outputs: count(),
  max_tool_chars: count(),
  // shorten_tools_epoch and shorten_tools_epoch_increment
  epoch_tool_call_threshold: count(),
  epoch_full_tool_calls: count(),
  epoch_compacted_tool_calls: count(),
  /** A non-positive size disables both epoch strategies. */
  epoch_size: z.number().int(),
  // shorten_tools_epoch_increment
  /** A non-positive value disables the periodic growth. */
  epoch_increment_epochs_per_increase: z.number().int(),
  epoch_increment_size_increase: count(),
  epoch_increment_repeat_increase: count(),
  epoch_increment_max_size: count(),
  epoch_increment_compacted_growth_ratio: z.number().nonnegative(),
  epoch_increment_max_compacted_tool_calls: count(),
  // shorten_images
  /** The newest images kept whole. */
  full_images: count(),
  /** How many new images move the image boundary at once (it moves every that many images). */
  image_epoch_size: z.number().int().positive(),
  // token budget and `compact` (lib/compaction/)
  /** Tokens of the model's window; 0 = the model family's default (lib/tokens/model-limits.ts). */
  context_limit: count(),
  /** Tokens kept free for the answer; 0 = the model family's default. */
  response_reserve: count(),
  /** `compact` summarizes once the prompt exceeds this share of context_limit - response_reserve. */
  compact_trigger_ratio: z.number().positive().max(1),
  /** After compacting, the newest items kept whole take at most this share of it. */
  compact_keep_ratio: z.number().positive().max(1),
};

/** Every key as required, without defaults; strategies pick their part of it as `configSchema`. */
export const strategyConfigFieldsSchema = z.object(strategyConfigShape).strict();

/** The defaults (docs/CONFIGURATION.md, "Strategies"). */
export const STRATEGY_CONFIG_DEFAULTS = Object.freeze({
  full_tool_calls: 0,
  full_tool_outputs: 10,
  max_tool_calls: 40,
  max_tool_outputs: 40,
  max_tool_chars: 100_000,
  epoch_tool_call_threshold: 50,
  epoch_full_tool_calls: 20,
  epoch_compacted_tool_calls: 80,
  epoch_size: 20,
  epoch_increment_epochs_per_increase: 3,
  epoch_increment_size_increase: 10,
  epoch_increment_repeat_increase: 10,
  epoch_increment_max_size: 60,
  epoch_increment_compacted_growth_ratio: 2.0,
  epoch_increment_max_compacted_tool_calls: 160,
  full_images: 3,
  image_epoch_size: 16,
  context_limit: 0,
  response_reserve: 0,
  compact_trigger_ratio: 0.8,
  compact_keep_ratio: 0.3,
});

/**
 * The thresholds of every built-in strategy, by their snake_case keys (the HTTP API
 * `strategy_config`), with their defaults. Strict: an unknown key or a wrong type is an
 * error naming the key.
 */
export const strategyConfigSchema = z.preprocess(
  (raw) =>
    raw !== null && typeof raw === 'object' && !Array.isArray(raw) ? { ...STRATEGY_CONFIG_DEFAULTS, ...raw } : raw,
  strategyConfigFieldsSchema,
);
export type StrategyConfig = z.output<typeof strategyConfigSchema>;
export type StrategyConfigKey = keyof StrategyConfig;

/** One layer (session or request `strategy_config`): any subset of the keys, still strict. */
export const strategyConfigLayerSchema = z.object(strategyConfigShape).partial().strict();
export type StrategyConfigLayer = z.infer<typeof strategyConfigLayerSchema>;

export const strategyConfigKeys = Object.keys(strategyConfigShape) as StrategyConfigKey[];

/** The environment variable of a key: its UPPER_SNAKE form (`epoch_size` -> `EPOCH_SIZE`). */
export function strategyConfigEnvName(key: StrategyConfigKey): string {
  return key.toUpperCase();
}

/** The default strategy list when a request and its session name none. */
export const DEFAULT_STRATEGIES: readonly string[] = ['shorten_tools_epoch_increment', 'shorten_images', 'inbox'];

/** The environment variable that overrides {@link DEFAULT_STRATEGIES}. */
export const PROMPT_STRATEGY_ENV = 'PROMPT_STRATEGY';

/**
 * The configured default strategy names: `PROMPT_STRATEGY` from the given environment
 * (comma-separated, names trimmed, blanks ignored) when set and not blank, else
 * `shorten_tools_epoch_increment,shorten_images,inbox`. Read per call; nothing is cached.
 */
export function defaultStrategyNames(env: Record<string, string | undefined> = {}): string[] {
  const configured = env[PROMPT_STRATEGY_ENV];
  if (configured !== undefined && configured.trim() !== '') return splitStrategyNames(configured);
  return [...DEFAULT_STRATEGIES];
}

/** The defaults alone, as a fresh object. */
export function defaultStrategyConfig(): StrategyConfig {
  return strategyConfigSchema.parse({});
}

export interface StrategyConfigLayers {
  /** Raw environment (strings); only the keys' UPPER_SNAKE names are read. */
  env?: Record<string, string | undefined>;
  /** The session's stored `strategy_config`. */
  session?: unknown;
  /** The request's `strategy_config`. */
  request?: unknown;
  /** The layer the request being answered sent (`request` unless it writes the session's). */
  sent?: 'session' | 'request';
  /** Where it sent that layer: `body` unless a preview's `query`. */
  location?: RequestPart;
}

/**
 * Resolves the strategy thresholds for one call: defaults, then env, then session, then
 * request (later layers win key by key). Every layer is validated strictly; a bad layer
 * throws InvalidRequestError with `details.field` naming the key (`strategy_config.<key>`,
 * the env name for env; the sent layer's message starts `body.strategy_config.<key>`, or
 * `query.`) and `details.layer`, and so does a merged config whose `response_reserve` leaves
 * a set `context_limit` no room for a prompt (checkPromptRoom). Called per request on purpose:
 * nothing is memoized, so a long-lived isolate sees config changes immediately.
 */
export function resolveStrategyConfig(layers: StrategyConfigLayers = {}): StrategyConfig {
  const parsed: Array<[Layer, StrategyConfigLayer]> = [];
  if (layers.env) parsed.push([{ layer: 'env' }, parseEnvLayer(layers.env)]);
  const sent = layers.sent ?? 'request';
  for (const layer of ['session', 'request'] as const) {
    if (layers[layer] === undefined) continue;
    const location = layer === sent ? (layers.location ?? 'body') : undefined;
    parsed.push([{ layer, ...(location ? { location } : {}) }, parseLayer(layers[layer], layer, location)]);
  }
  const config = strategyConfigSchema.parse(Object.assign({}, ...parsed.map(([, values]) => values)));
  checkPromptRoom(config, parsed);
  return config;
}

/** Which layer set a key, and where a request sent it. */
type Layer = { layer: string; location?: RequestPart };

/**
 * A `response_reserve` at or above a set `context_limit` leaves the prompt no room: refused,
 * naming the key the last layer to set either of them set (`response_reserve` when it set both),
 * so a session's limit and a request's reserve are judged together and the request is named.
 */
function checkPromptRoom(config: StrategyConfig, parsed: ReadonlyArray<[Layer, StrategyConfigLayer]>): void {
  const { context_limit: limit, response_reserve: reserve } = config;
  if (limit === 0 || reserve < limit) return;
  const [last, values] = parsed.findLast(([, layer]) => 'context_limit' in layer || 'response_reserve' in layer)!;
  const key: StrategyConfigKey = 'response_reserve' in values ? 'response_reserve' : 'context_limit';
  // A variable is named by its upper-case name, a key of a layer by its own.
  const name = (each: StrategyConfigKey) => (last.layer === 'env' ? strategyConfigEnvName(each) : each);
  // The other value, set by another layer (both are, as neither default refuses), is named by where it came from.
  const other: StrategyConfigKey = key === 'response_reserve' ? 'context_limit' : 'response_reserve';
  const [from] = parsed.findLast(([, layer]) => other in layer)!;
  const source =
    from.layer === last.layer
      ? ''
      : from.layer === 'env'
        ? ` (the deployment's ${strategyConfigEnvName(other)})`
        : ` (the ${from.layer}'s)`;
  const reason =
    key === 'response_reserve'
      ? `${reserve} must be less than ${name('context_limit')} ${limit}${source}`
      : `${limit} must be greater than ${name('response_reserve')} ${reserve}${source}`;
  const because = `(no room is left for the prompt, which gets context_limit - response_reserve tokens)`;
  const room = { context_limit: limit, response_reserve: reserve };
  if (last.layer === 'env') {
    throw new InvalidRequestError(`environment ${name(key)}: ${reason} ${because}`, {
      field: name(key),
      layer: 'env',
      ...room,
    });
  }
  const field = `strategy_config.${key}`;
  const named = last.location === undefined ? field : `${last.location}.${field}`;
  throw new InvalidRequestError(`${named}: ${reason} ${because}`, { field, layer: last.layer, ...room });
}

/**
 * Validates one `strategy_config` layer (session or request) and returns it, or throws
 * InvalidRequestError naming the offending key, its message starting with where the request
 * sent it (`body.strategy_config.epoch_sise: unknown key`), as a schema's refusal does.
 */
export function parseStrategyConfigLayer(
  raw: unknown,
  layer = 'request',
  location: RequestPart = 'body',
): StrategyConfigLayer {
  return parseLayer(raw, layer, location);
}

/** Where a request sent a layer: its body or its query string (none: a stored session's). */
type RequestPart = 'body' | 'query';

function parseLayer(raw: unknown, layer: string, location?: RequestPart): StrategyConfigLayer {
  const result = strategyConfigLayerSchema.safeParse(raw ?? {});
  if (result.success) return result.data;
  const issue = result.error.issues[0]!;
  const key =
    issue.code === 'unrecognized_keys' ? String(issue.keys[0]) : issue.path.length > 0 ? String(issue.path[0]) : '';
  const reason = issue.code === 'unrecognized_keys' ? 'unknown key' : issue.message;
  // The field's path in the body (or query) that sent it, as a schema names one.
  const path = key === '' ? ['strategy_config'] : ['strategy_config', key];
  const field = path.join('.');
  // A key of digits is a key (`strategy_config.0`), not a position.
  const named = location === undefined ? field : `${location}.${field}`;
  throw new InvalidRequestError(`${named}: ${reason}`, pathDetails({ field, layer }, bracketSegments(path)));
}

function parseEnvLayer(env: Record<string, string | undefined>): StrategyConfigLayer {
  const layer: Record<string, unknown> = {};
  for (const key of strategyConfigKeys) {
    const name = strategyConfigEnvName(key);
    const raw = env[name];
    if (raw === undefined || raw.trim() === '') continue;
    // Decimal digits, as every whole-number setting (lib/setting-values.ts numberText); a ratio's may have a point.
    const whole = strategyConfigShape[key].isInt;
    const value = decimalNumber(raw, !whole);
    if (!Number.isFinite(value)) {
      const what = whole ? 'a whole number in decimal digits' : 'a number in decimal digits';
      throw new InvalidRequestError(`environment ${name}: not ${what}: ${JSON.stringify(raw)}`, {
        field: name,
        layer: 'env',
      });
    }
    layer[key] = value;
  }
  const result = strategyConfigLayerSchema.safeParse(layer);
  if (!result.success) {
    const issue = result.error.issues[0]!;
    const name = strategyConfigEnvName(String(issue.path[0]) as StrategyConfigKey);
    throw new InvalidRequestError(`environment ${name}: ${issue.message}`, { field: name, layer: 'env' });
  }
  return result.data;
}
