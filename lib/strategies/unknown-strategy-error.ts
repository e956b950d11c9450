import { TailgateError } from '../errors.ts';

/** A strategy list named a strategy that is not registered. `details.known` lists the names. */
export class UnknownStrategyError extends TailgateError {
  readonly strategy: string;
  readonly known: string[];

  constructor(strategy: string, known: string[]) {
    super('unknown_strategy', `unknown strategy "${strategy}"; known strategies: ${known.join(', ')}`, {
      strategy,
      known,
    });
    this.name = 'UnknownStrategyError';
    this.strategy = strategy;
    this.known = known;
  }
}
