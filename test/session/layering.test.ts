import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * The session log stores what the strategies produce (views) but must not import them: the
 * turn layer hands it a ViewPolicy (lib/turn/view-policy.ts), so a change to a strategy never
 * changes how bytes already persisted are read, only which views are read (its version).
 */

const root = fileURLToPath(new URL('../..', import.meta.url));
const sessionDir = join(root, 'lib', 'session');

function sourceFiles(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) =>
    entry.isDirectory()
      ? sourceFiles(join(dir, entry.name))
      : entry.name.endsWith('.ts')
        ? [join(dir, entry.name)]
        : [],
  );
}

/** Every module specifier a file imports or re-exports (static, dynamic and type-only). */
function specifiers(text: string): string[] {
  const found: string[] = [];
  for (const match of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)['"]([^'"]+)['"]/g)) found.push(match[1]!);
  return found;
}

describe('layering', () => {
  it('nothing under lib/session/ imports lib/strategies/', () => {
    const files = sourceFiles(sessionDir);
    expect(files.length).toBeGreaterThan(20);
    const offending: string[] = [];
    for (const file of files) {
      for (const specifier of specifiers(readFileSync(file, 'utf8'))) {
        if (!specifier.startsWith('.')) continue;
        const target = relative(root, join(file, '..', specifier));
        if (target.startsWith(join('lib', 'strategies'))) offending.push(`${relative(root, file)} -> ${specifier}`);
      }
    }
    expect(offending).toEqual([]);
  });

  it('the check sees an import of the strategies', () => {
    expect(specifiers('import type { X } from \'../../strategies/strategy.ts\';\nexport { y } from "./y.ts";')).toEqual(
      ['../../strategies/strategy.ts', './y.ts'],
    );
  });
});
