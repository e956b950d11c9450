export * from './keys.ts';
export * from './session-exists-error.ts';
export * from './session-log.ts';
export * from './turn-errors.ts';
export * from './turn-in-progress-error.ts';
