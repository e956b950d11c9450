import type { Model as OpenAIModel } from 'openai/resources/models';
import type { ServiceConfig } from '../config.ts';
import { ModelConfigurationError, UnknownModelError } from '../models/errors.ts';
import type { Model } from '../models/model.ts';
import { OpenAIApiError } from './errors.ts';

/**
 * The models of the OpenAI-compatible API: a request names a tailgate model id (`echo`,
 * `anthropic:claude-sonnet-4-5`) or a MODEL_ALIASES name. `GET /v1/models` lists the ones
 * the deployment is configured with: DEFAULT_MODEL, SUMMARY_MODEL, `echo` and every alias.
 */

type ModelConfig = Pick<ServiceConfig, 'defaultModel' | 'summaryModel' | 'modelAliases'>;

/**
 * The tailgate model id a request names: itself, or what MODEL_ALIASES maps it to. 404
 * model_not_found (param `param`) when no model has that name.
 */
export function facadeModelId(
  config: ModelConfig,
  resolve: (id: string) => Model,
  name: string,
  param = 'model',
): string {
  const id = aliasTarget(config, name);
  try {
    resolve(id);
  } catch (error) {
    if (error instanceof UnknownModelError)
      throw new OpenAIApiError(
        404,
        'model_not_found',
        `The model \`${name}\` does not exist (use a tailgate model id such as echo or openai:gpt-4.1-mini, or a ` +
          `MODEL_ALIASES name)`,
        param,
      );
    throw error;
  }
  return id;
}

/**
 * A model in OpenAI's shape; `owned_by` is the provider of the tailgate id it names, and
 * `tailgate.configured` whether a request may use it as the deployment is configured (false:
 * `tailgate.setting` names the setting it needs, missing or malformed, which a turn would
 * answer 503 `not_configured` for; absent for a model no provider has).
 */
function modelObject(config: ModelConfig, resolve: (id: string) => Model, name: string) {
  const id = aliasTarget(config, name);
  const colon = id.indexOf(':');
  const model: OpenAIModel & { tailgate: { model: string; configured: boolean; setting?: string } } = {
    id: name,
    object: 'model',
    // tailgate has no creation time for a model: the epoch, as the type requires a number.
    created: 0,
    owned_by: colon > 0 ? id.slice(0, colon) : id,
    tailgate: { model: id, configured: true },
  };
  try {
    resolve(id);
  } catch (error) {
    if (error instanceof ModelConfigurationError)
      model.tailgate = { model: id, configured: false, setting: error.setting };
    else if (error instanceof UnknownModelError) model.tailgate = { model: id, configured: false };
    else throw error;
  }
  return model;
}

/** `GET /v1/models`: the configured models and the aliases, each once, in that order. */
export function modelList(config: ModelConfig, resolve: (id: string) => Model) {
  const names = [config.defaultModel, config.summaryModel, 'echo', ...Object.keys(config.modelAliases)];
  const unique = [...new Set(names.filter((name): name is string => name !== undefined))];
  return { object: 'list' as const, data: unique.map((name) => modelObject(config, resolve, name)) };
}

/**
 * `GET /v1/models/{id}`: any model a request may name (listed or not), whether or not its
 * provider's settings are configured (reading it needs no key); 404 model_not_found else.
 */
export function modelById(config: ModelConfig, resolve: (id: string) => Model, name: string) {
  const model = modelObject(config, resolve, name);
  // A model no provider has (a name that is no alias, nor a tailgate id): 404.
  if (!model.tailgate.configured && model.tailgate.setting === undefined) facadeModelId(config, resolve, name);
  return model;
}

/**
 * The name a response answers for tailgate model `id` where the name its request used is not
 * kept (a foreground response still running, lib/openai/stored-responses.ts): the MODEL_ALIASES
 * name that maps to it when exactly one does, else the id.
 */
export function modelName(config: ModelConfig, id: string): string {
  const names = Object.keys(config.modelAliases).filter((name) => config.modelAliases[name] === id);
  return names.length === 1 ? names[0]! : id;
}

/** What MODEL_ALIASES maps `name` to, or `name` (an alias is the map's own key, not `toString`). */
function aliasTarget(config: ModelConfig, name: string): string {
  return Object.hasOwn(config.modelAliases, name) ? config.modelAliases[name]! : name;
}
