export * from './check-prompt-fits.ts';
export * from './plan-compaction.ts';
export * from './summarize-context.ts';
export * from './summary-budget.ts';
export * from './summary-transcript.ts';
export * from './truncate-prompt.ts';
export * from './fit-prompt.ts';
