import { InvalidRequestError, NotConfiguredError, UnknownStrategyError } from './errors.ts';
import { resolveStrategies } from './strategies/prepare-prompt.ts';
import { builtInRegistry } from './strategies/registry.ts';
import { resolveStrategyConfig, strategyConfigEnvName, strategyConfigKeys } from './strategies/strategy-config.ts';

/** The strategy settings of the environment: each threshold's upper-case variable, and PROMPT_STRATEGY. */
export const STRATEGY_SETTINGS = [...strategyConfigKeys.map(strategyConfigEnvName), 'PROMPT_STRATEGY'];

/**
 * What is wrong with the strategy settings of the environment (lib/config.ts parseServiceConfig):
 * none, or each bad one, as `not_configured` naming its variable. Checked together first (what
 * every request's read of the settings pays), then, when that fails, each on its own, and
 * CONTEXT_LIMIT with RESPONSE_RESERVE as a pair, so that one bad value hides no other.
 */
export function strategySettingProblems(env: Record<string, string | undefined>): NotConfiguredError[] {
  const together = strategySettingProblem(env);
  if (together === undefined) return [];
  const alone = STRATEGY_SETTINGS.map((name) => strategySettingProblem({ [name]: env[name] }));
  const problems = alone.filter((problem) => problem !== undefined);
  // A reserve at or above a set limit is wrong only of the two together: judged as a pair too,
  // unless one of them is wrong alone (named already).
  const pair = strategySettingProblem(Object.fromEntries(WINDOW_PAIR.map((name) => [name, env[name]])));
  if (pair && !problems.some((problem) => WINDOW_PAIR.includes(variableOf(problem)))) problems.push(pair);
  return problems.length > 0 ? problems : [together];
}

/** The settings judged together as well as alone: the window and the reserve that leaves the prompt its room. */
const WINDOW_PAIR = ['CONTEXT_LIMIT', 'RESPONSE_RESERVE'];

/** The variable a problem names. */
function variableOf(problem: NotConfiguredError): string {
  return String((problem.details as { variable?: unknown }).variable);
}

/**
 * The strategy settings of the environment (PROMPT_STRATEGY's names, the thresholds'
 * upper-case variables) are the operator's: a bad one is `not_configured` naming the
 * variable, not a 400 blaming the request that happened to read it.
 */
function strategySettingProblem(env: Record<string, string | undefined>): NotConfiguredError | undefined {
  try {
    resolveStrategyConfig({ env });
    resolveStrategies(undefined, builtInRegistry, env);
    return undefined;
  } catch (error) {
    if (error instanceof UnknownStrategyError) {
      return new NotConfiguredError(`invalid setting PROMPT_STRATEGY: ${error.message}`, {
        variable: 'PROMPT_STRATEGY',
        known: error.known,
      });
    }
    if (!(error instanceof InvalidRequestError)) throw error;
    // "environment EPOCH_SIZE: not a whole number in decimal digits: ...", with `details.field` the variable.
    const variable = String((error.details as { field?: unknown } | undefined)?.field ?? 'environment');
    const reason = error.message.slice(error.message.indexOf(': ') + 2);
    return new NotConfiguredError(`invalid setting ${variable}: ${reason}`, { variable });
  }
}
