import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect, it } from 'vitest';
import { DEFAULT_PRICES } from '../../lib/ledger/prices.ts';

const root = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(join(root, path), 'utf8');
const docs = [
  'README.md',
  ...readdirSync(join(root, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

// docs/CONFIGURATION.md, "What it cost": the models lib/ledger/prices.ts prices, then those the docs
// name that have no price.
const costs = read('docs/CONFIGURATION.md');
const paragraph = costs.slice(costs.indexOf('**What it cost.**'), costs.indexOf('MODEL_PRICES` adds models'));
const [priced, unpriced] = paragraph
  .split('have none')
  .map((part) => [...part.matchAll(/`([a-z-]+:[^`]*)`/g)].map((match) => match[1]!));

it('lists the models with a default price as lib/ledger/prices.ts prices them', () => {
  expect(priced!.toSorted()).toEqual(
    Object.keys(DEFAULT_PRICES)
      .filter((id) => id !== 'echo')
      .toSorted(),
  );
});

it('gives every model id the docs name a default price, or says it has none', () => {
  const named = new Set(
    docs.flatMap((path) =>
      [...read(path).matchAll(/\b(?:openai|anthropic|workers-ai):[A-Za-z0-9@/._-]*[A-Za-z0-9]/g)].map(
        (match) => match[0],
      ),
    ),
  );
  expect(named.size).toBeGreaterThan(0);
  const without = [...named].filter((id) => DEFAULT_PRICES[id] === undefined && !unpriced!.includes(id));
  expect(without).toEqual([]);
  // `openai-compatible:` models (a local server's) have none, as the paragraph says.
  expect(unpriced).toContain('openai-compatible:');
});
