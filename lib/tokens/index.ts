export * from './model-limits.ts';
export * from './token-counter.ts';
