import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

// docs/OPENAI.md names its own entries (`- **Retries**: ...`) and headings in quotes, often
// several together ("Retries", "Aborted and cancelled responses are not retried"): an entry
// renamed leaves such a reference naming nothing.
const root = fileURLToPath(new URL('../..', import.meta.url));
const text = readFileSync(join(root, 'docs/OPENAI.md'), 'utf8');
/** The text with its line breaks as spaces, as a reference wraps across lines. */
const flat = text.replace(/\s*\n\s*/g, ' ');
const names = new Set([
  ...[...text.matchAll(/^\s*- \*\*(.+?)\*\*/gm)].map((match) => match[1]!),
  ...[...text.matchAll(/^#+ (.+)$/gm)].map((match) => match[1]!.trim()),
]);

describe("docs/OPENAI.md's references to its own entries", () => {
  it('name entries it has, where quoted together with one', () => {
    const groups = [...flat.matchAll(/"[^"]{2,120}"(?:,? (?:and |or )?"[^"]{2,120}")+/g)].map((match) =>
      [...match[0].matchAll(/"([^"]+)"/g)].map((quoted) => quoted[1]!),
    );
    const referring = groups.filter((group) => group.some((name) => names.has(name)));
    expect(referring.length).toBeGreaterThan(0);
    expect(referring.flat().filter((name) => !names.has(name))).toEqual([]);
  });
});
