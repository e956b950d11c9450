import { getGlobalTraceProvider, setTracingDisabled } from '@openai/agents';
import { afterAll, beforeAll } from 'vitest';

/**
 * @openai/agents registers its trace exporter when it is imported, and that exporter's loop
 * re-arms a timer every 5 s for the life of the process. Its tests turn tracing off, and stop
 * the loop after the file: the files a worker runs after it share the process (vitest.config.ts),
 * and a loop re-armed under another file's fake timers keeps that file's timers busy for ever
 * (the crash simulation's scheduler moves fake timers until none is left).
 */
export function agentsTracingOff(): void {
  beforeAll(() => setTracingDisabled(true));
  afterAll(() => getGlobalTraceProvider().shutdown());
}
