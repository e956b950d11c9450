#!/usr/bin/env node
/**
 * `npm run reset`: deletes the local state of `npm start` (.wrangler/state) and of the Node and
 * Deno servers (.tailgate: the file store's default DATA_DIR) in the working directory, unless
 * a server that marked itself there (`.tailgate/servers/<pid>`, functions/local-server.ts
 * `markRunning`, scripts/start.ts) is still running: then it says which and exits 1. Markers of
 * processes that are gone (killed with SIGKILL) are ignored. It says which of the two it removed,
 * or that neither was there.
 */
import { existsSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import process from 'node:process';

const markers = join('.tailgate', 'servers');

function alive(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return error.code === 'EPERM';
  }
}

let names = [];
try {
  names = readdirSync(markers);
} catch {
  // No server ever marked itself here.
}
const running = names
  .filter((name) => /^\d+$/.test(name) && Number(name) !== process.pid && alive(Number(name)))
  .map((name) => `${readFileSync(join(markers, name), 'utf8').trim() || 'a server'} (pid ${name})`);
if (running.length > 0) {
  const [verb, pronoun] = running.length === 1 ? ['is', 'it'] : ['are', 'them'];
  console.error(`tailgate: not resetting: ${running.join(', ')} ${verb} using this directory; stop ${pronoun} first`);
  process.exit(1);
}
const directories = ['.wrangler/state', '.tailgate'];
const removed = directories.filter((directory) => existsSync(directory));
for (const directory of removed) rmSync(directory, { recursive: true, force: true });
console.log(
  removed.length > 0
    ? `tailgate: removed ${removed.join(' and ')}`
    : `tailgate: nothing to remove (no ${directories.join(' or ')})`,
);
