export * from './keys.ts';
export * from './session-log.ts';
