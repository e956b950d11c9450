import type { TurnServices } from './types.ts';

/**
 * Hands `task` to `background` (waitUntil on Workers) to start on a timer, so its storage
 * calls come after the response has been produced, not among the request's own.
 */
export function afterResponse(services: Pick<TurnServices, 'background'>, task: () => Promise<unknown>): void {
  services.background(new Promise((resolve) => setTimeout(resolve, 0)).then(task));
}
