import { compact } from './compact.ts';
import { UnknownStrategyError } from '../errors.ts';
import { inbox } from './inbox.ts';
import { none } from './none.ts';
import { shortenImages } from './shorten-images.ts';
import { shortenToolsEpochIncrement } from './shorten-tools-epoch-increment.ts';
import { shortenToolsEpoch } from './shorten-tools-epoch.ts';
import { shortenTools } from './shorten-tools.ts';
import type { Strategy, StrategyRegistry } from './strategy.ts';

/** The built-in strategies, in the order their names are listed. */
export const builtInStrategies: readonly Strategy[] = [
  shortenTools,
  shortenToolsEpoch,
  shortenToolsEpochIncrement,
  shortenImages,
  inbox,
  none,
  compact,
];

/**
 * A registry of the built-in strategies plus `custom` ones (e.g. for a deployment or a
 * test). Registries are immutable values, so nothing is shared or changed process-wide:
 * `registry.with(strategy)` returns a new one. A custom name that is already known throws.
 *
 * Example: `preparePrompt(items, 'redact,inbox', { registry: createRegistry([redact]) })`.
 */
export function createRegistry(custom: readonly Strategy[] = []): StrategyRegistry {
  return buildRegistry(new Map(), [...builtInStrategies, ...custom]);
}

function buildRegistry(base: ReadonlyMap<string, Strategy>, added: readonly Strategy[]): StrategyRegistry {
  const byName = new Map(base);
  for (const strategy of added) {
    if (byName.has(strategy.name)) throw new Error(`strategy "${strategy.name}" is already registered`);
    byName.set(strategy.name, strategy);
  }
  const registry: StrategyRegistry = {
    get(name) {
      const strategy = byName.get(name);
      if (strategy === undefined) throw new UnknownStrategyError(name, [...byName.keys()]);
      return strategy;
    },
    has: (name) => byName.has(name),
    names: () => [...byName.keys()],
    with: (...strategies) => buildRegistry(byName, strategies),
  };
  return Object.freeze(registry);
}

/** The registry used when a context names none: the built-ins only. */
export const builtInRegistry: StrategyRegistry = createRegistry();
