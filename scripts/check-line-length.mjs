#!/usr/bin/env node
// `npm run lint` runs this after Biome: every line of code (*.ts, *.tsx, *.mjs, tracked or new,
// .gitignore respected) is at most 120 characters. Biome wraps code to 120 but leaves long
// strings and comments alone; wrap those by hand. Prints each long line and exits 1.
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const LIMIT = 120;
const root = fileURLToPath(new URL('..', import.meta.url));
const files = execFileSync(
  'git',
  ['ls-files', '--cached', '--others', '--exclude-standard', '--', '*.ts', '*.tsx', '*.mjs'],
  { cwd: root, encoding: 'utf8' },
)
  .split('\n')
  .filter((file) => file !== '');

let long = 0;
for (const file of files) {
  let text;
  try {
    text = readFileSync(new URL(file, new URL('..', import.meta.url)), 'utf8');
  } catch {
    continue; // deleted in the work tree, not yet in the index
  }
  text.split('\n').forEach((line, index) => {
    if (line.length <= LIMIT) return;
    long++;
    console.error(`${file}:${index + 1}: ${line.length} characters (at most ${LIMIT})`);
  });
}
if (long > 0) {
  console.error(`${long} line${long === 1 ? '' : 's'} over ${LIMIT} characters`);
  process.exit(1);
}
