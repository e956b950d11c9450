import { parseServiceConfig, SERVICE_ENV_NAMES, type ServiceConfig } from './config.ts';
import { STRATEGY_SETTINGS } from './strategy-settings.ts';

/**
 * The service settings of a request (parseServiceConfig, lib/config.ts), parsed again only when
 * what it reads differs from the last parse: each variable of SERVICE_ENV_NAMES and the strategy
 * settings (lib/strategy-settings.ts) is read on every request, so a changed variable still takes
 * effect at once, whichever object carries it (a Worker's bindings, `process.env`, a new
 * `Deno.env.toObject()` a request). Only those variables are handed to the parse, so nothing
 * else can make two equal keys parse differently. Settings that do not parse are not kept: each
 * request parses them again and throws what parseServiceConfig throws.
 */
export function serviceConfigOf(env: Record<string, unknown>): ServiceConfig {
  const settings: Record<string, string | number | boolean> = {};
  const values: (string | number | boolean | null)[] = [];
  for (const name of SERVICE_CONFIG_READS) {
    const value = env[name];
    const kept = typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean';
    if (kept) settings[name] = value;
    values.push(kept ? value : null);
  }
  // JSON tells "1" from 1 and true from "true", which the parse may take apart.
  const key = JSON.stringify(values);
  if (last?.key === key) return last.config;
  parses++;
  const config = parseServiceConfig(settings);
  last = { key, config };
  return config;
}

/** How many times serviceConfigOf has parsed settings (rather than answered from its last parse). */
export function serviceConfigParses(): number {
  return parses;
}

/** Every variable parseServiceConfig reads (a string, number or boolean; anything else is unset to it). */
export const SERVICE_CONFIG_READS: readonly string[] = [...new Set([...SERVICE_ENV_NAMES, ...STRATEGY_SETTINGS])];

let last: { key: string; config: ServiceConfig } | undefined;
let parses = 0;
