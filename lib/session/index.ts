export * from './keys.ts';
export * from './session-exists-error.ts';
export * from './session-log.ts';
export * from './turn-closed-error.ts';
export * from './turn-in-progress-error.ts';
