import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { localServerOptions } from '../../functions/local-server.ts';
import { parseServiceConfig, SERVICE_ENV_NAMES } from '../../lib/config.ts';
import {
  PROMPT_STRATEGY_ENV,
  resolveStrategyConfig,
  STRATEGY_CONFIG_DEFAULTS,
  strategyConfigEnvName,
  strategyConfigKeys,
} from '../../lib/strategies/strategy-config.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');

/** The settings of the Node and Deno servers alone, read at startup by functions/local-server.ts. */
const localNames = (source: string) =>
  [...source.matchAll(/env\.([A-Z][A-Z0-9_]+)|milliseconds\(env, '([A-Z][A-Z0-9_]+)'/g)].map((m) => (m[1] ?? m[2])!);

const strategyNames = strategyConfigKeys.map(strategyConfigEnvName);

/** The rows of the table under "## Configuration": the variables a row names, and its Default cell. */
function settingRows(page: string): Array<{ names: string[]; defaults: string }> {
  const start = page.indexOf('| Variable | Default |');
  const table = page.slice(start, page.indexOf('\n\n', start));
  return table
    .split('\n')
    .slice(2)
    .map((line) => line.split(' | '))
    .map(([names, defaults]) => ({
      names: [...(names ?? '').matchAll(/`([A-Z][A-Z0-9_]+)`/g)].map((m) => m[1]!),
      defaults: defaults ?? '',
    }));
}

/** A documented default as a value to set: its first number or backticked text; null for "none", "unset"... */
function literal(cell: string): string | null {
  const match = /^\s*(?:`([^`]*)`|(\d[\d.]*))/.exec(cell);
  return match ? (match[1] ?? match[2])! : null;
}

/** Each variable of a row with its documented default (one cell per variable, or one for all). */
function documentedDefaults(rows: Array<{ names: string[]; defaults: string }>): Array<[string, string]> {
  return rows.flatMap(({ names, defaults }) => {
    const cells = defaults.split(', ');
    return names.flatMap((name, index): Array<[string, string]> => {
      const value = literal(names.length > 1 && cells.length === names.length ? cells[index]! : defaults);
      return value === null ? [] : [[name, value]];
    });
  });
}

/** The documented defaults that, set explicitly, configure anything else than leaving them unset. */
function wrongDefaults(defaults: Array<[string, string]>): string[] {
  return defaults
    .filter(([name, value]) => {
      if (strategyNames.includes(name))
        return (
          JSON.stringify(resolveStrategyConfig({ env: { [name]: value } })) !== JSON.stringify(resolveStrategyConfig())
        );
      if (SERVICE_ENV_NAMES.includes(name))
        return JSON.stringify(parseServiceConfig({ [name]: value })) !== JSON.stringify(parseServiceConfig({}));
      return JSON.stringify(localServerOptions([], { [name]: value })) !== JSON.stringify(localServerOptions([], {}));
    })
    .map(([name, value]) => `${name}=${value}`);
}

describe('docs/CONFIGURATION.md', () => {
  const page = read('docs/CONFIGURATION.md');
  const rows = settingRows(page);
  const documented = rows.flatMap((row) => row.names);
  const local = localNames(read('functions/local-server.ts'));

  it('lists every setting the code reads, and none it does not', () => {
    expect(local).toEqual(expect.arrayContaining(['PORT', 'HOST', 'SHUTDOWN_GRACE_MS']));
    const read = [...SERVICE_ENV_NAMES, ...strategyNames, PROMPT_STRATEGY_ENV, ...local];
    expect(read.filter((name) => !documented.includes(name))).toEqual([]);
    expect(documented.filter((name) => !read.includes(name))).toEqual([]);
  });

  it('gives each setting its real default', () => {
    const defaults = documentedDefaults(rows);
    expect(defaults.length).toBeGreaterThan(25);
    expect(wrongDefaults(defaults)).toEqual([]);
    for (const key of strategyConfigKeys) expect(page).toContain(`\`${key}\` ${STRATEGY_CONFIG_DEFAULTS[key]}`);
  });

  it('fails on a wrong default', () => {
    const table = [
      '| Variable | Default | What |',
      '| --- | --- | --- |',
      '| `MAX_BODY_BYTES` | 4000000 | x |',
      '| `PORT`, `HOST` | 8787, 0.0.0.0 | x |',
      '| `EPOCH_SIZE` | 20 | x |',
      '| `API_TOKEN` | none | x |',
      '',
    ].join('\n');
    expect(wrongDefaults(documentedDefaults(settingRows(table)))).toEqual(['MAX_BODY_BYTES=4000000', 'HOST=0.0.0.0']);
  });
});
