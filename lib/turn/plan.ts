import type { Item, Tool } from '../items.ts';
import { TailgateError, UnknownStrategyError } from '../errors.ts';
import { pathDetails } from '../field-path.ts';
import { sha256Hex } from '../hash.ts';
import { type Model, refuseOverToolLimit } from '../models/model.ts';
import type { PackOptions, SessionRecord } from '../session/session-log.ts';
import { builtInRegistry, resolveStrategies, resolveStrategyConfig, tailRequirement } from '../strategies/index.ts';
import type { StrategyConfig } from '../strategies/strategy-config.ts';
import type { TurnServices, TurnRequest } from './types.ts';

/** What a turn runs with: its strategies, thresholds, model and tools, and what packing needs. */

/**
 * The strategy names a list resolves to (undefined: PROMPT_STRATEGY from env, else the
 * default list). Throws UnknownStrategyError (400, listing the known names) for an unknown
 * one, so a bad list is refused before anything is stored; a list the request gave as `field`
 * is named there (`strategies`, or `strategies.1` for the second name of an array).
 */
export function resolveStrategyNames(
  spec: string | readonly string[] | undefined,
  env: Record<string, string | undefined>,
  field?: string,
): string[] {
  try {
    return resolveStrategies(spec, builtInRegistry, env).map((strategy) => strategy.name);
  } catch (error) {
    if (field === undefined || spec === undefined || !(error instanceof UnknownStrategyError)) throw error;
    const position = typeof spec === 'string' ? -1 : spec.findIndex((name) => name.trim() === error.strategy);
    const [dotted, bracketed] = position < 0 ? [field, field] : [`${field}.${position}`, `${field}[${position}]`];
    const details = pathDetails({ field: dotted, ...(error.details as object) }, bracketed);
    throw new TailgateError(error.code, `${bracketed}: ${error.message}`, details);
  }
}

/** `strategies` when the request gives its own list, else nothing: the session's was checked when written. */
const requestField = (request: { strategies?: unknown }) =>
  request.strategies !== undefined ? 'strategies' : undefined;

export interface TurnPlan {
  strategies: string[];
  strategyConfig: StrategyConfig;
  model: Model;
  tools: Tool[];
}

/**
 * What `pack` needs to write a view the next turns can read instead of the log: the tail
 * their strategies need (the plan of a turn, or a session's settings without a request).
 */
export function packOptions(plan: Pick<TurnPlan, 'strategies' | 'strategyConfig'>): PackOptions {
  return {
    requirement: (aggregates, context) =>
      context ? CONTEXT_REQUIREMENT : tailRequirement(plan.strategies, plan.strategyConfig, aggregates),
  };
}

/** The strategies and thresholds of a session's turns when the request sets none. */
export function sessionStrategyPlan(
  env: Record<string, string | undefined>,
  session: Pick<SessionRecord, 'strategies' | 'strategy_config'>,
): Pick<TurnPlan, 'strategies' | 'strategyConfig'> {
  return {
    strategies: resolveStrategyNames(session.strategies ?? undefined, env),
    strategyConfig: resolveStrategyConfig({ env, session: session.strategy_config }),
  };
}

/** The strategies, thresholds, model and tools of a turn, from the request over the session. */
export function planTurn(
  services: TurnServices,
  session: SessionRecord,
  request: Pick<TurnRequest, 'model' | 'strategies' | 'tools'> & {
    strategy_config?: Record<string, unknown> | undefined;
  },
  location: 'body' | 'query' = 'body',
): TurnPlan {
  const strategies = resolveStrategyNames(
    request.strategies ?? session.strategies ?? undefined,
    services.env,
    requestField(request),
  );
  const strategyConfig = resolveStrategyConfig({
    env: services.env,
    session: session.strategy_config,
    request: request.strategy_config,
    location,
  });
  const model = services.model(request.model ?? session.model ?? services.config.defaultModel);
  return { strategies, strategyConfig, model, tools: request.tools ?? session.tools };
}

/**
 * Everything the request itself can be refused for (its strategy list, thresholds and model,
 * and the deployment's defaults), checked before the turn is claimed so a refused request
 * stores nothing. The session's own settings were checked when they were written, so the
 * turn reads the session only once, as part of its claim.
 */
export function checkRequest(
  services: TurnServices,
  request: Pick<TurnRequest, 'model' | 'strategies' | 'strategy_config'>,
): void {
  resolveStrategyNames(request.strategies, services.env, 'strategies');
  resolveStrategyConfig({ env: services.env, request: request.strategy_config });
  if (request.model !== undefined) services.model(request.model);
}

/**
 * At a turn's claim, what its session's config (`config`) lets be checked before anything is
 * stored: its thresholds over the session's (a session's `context_limit` and the request's
 * `response_reserve` are judged together), its model (the request's over the session's, else
 * the deployment's), the tools it offers that model (the request's, else the session's: more than
 * the model takes is a 400 before any model call, a compaction's summary neither), and, for a
 * token whose budget caps its cost, the price of SUMMARY_MODEL where the turn may compact (its
 * strategies hold `compact`, or it asks `compaction`), which the compaction would call once
 * its input is stored (TokenSpend.checkPriced).
 */
export function checkTurnModels(
  services: TurnServices,
  request: Pick<TurnRequest, 'model' | 'strategies' | 'compaction' | 'strategy_config' | 'tools' | 'model_settings'>,
  config: Pick<SessionRecord, 'model' | 'strategies' | 'strategy_config' | 'tools'>,
): void {
  resolveStrategyConfig({ env: services.env, session: config.strategy_config, request: request.strategy_config });
  const model = services.model(request.model ?? config.model ?? services.config.defaultModel);
  refuseOverToolLimit(model, request.tools ?? config.tools, request.model_settings);
  const summaryModel = services.config.summaryModel;
  if (!services.tokenSpend || !summaryModel) return;
  const strategies = resolveStrategyNames(
    request.strategies ?? config.strategies ?? undefined,
    services.env,
    requestField(request),
  );
  if (request.compaction === undefined && !strategies.includes('compact')) return;
  services.tokenSpend.checkPriced(summaryModel, services.config.modelPrices, 'SUMMARY_MODEL');
}

/** What a compacted context's turn reads: everything from the context start. */
export const CONTEXT_REQUIREMENT = { toolCalls: 'all' as const, seqs: [] };

export function inputItems(request: TurnRequest): Item[] {
  return typeof request.input === 'string'
    ? [{ type: 'message', role: 'user', content: request.input }]
    : request.input;
}

/**
 * The SHA-256 of what a keyed turn was asked (input and settings, not `stream`): a retry
 * with the same key and another request is refused.
 */
export function requestHash(input: Item[], request: TurnRequest): string {
  const { input: _input, ...settings } = request;
  return sha256Hex(
    JSON.stringify({
      input,
      settings: Object.fromEntries(Object.entries(settings).sort(([a], [b]) => a.localeCompare(b))),
    }),
  );
}
