import { accessSync, constants } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll } from 'vitest';
import { World } from '../support/simulation.ts';
import { FileStore } from '../../lib/store/file.ts';
import { defineForkSimulation } from './fork-simulation-suite.ts';
import { defineRewindSimulation } from './rewind-simulation-suite.ts';
import { defineFlattenSimulation } from './flatten-simulation-suite.ts';
import { defineProtocolSimulation } from './protocol-simulation-suite.ts';

// The protocol simulation on the file store: each actor writes through a FileStore of its own on
// one directory, so their writes contend through the lock files as several processes' would,
// with real I/O overlapping. A tenth of the memory store's interleavings.
const directories: string[] = [];
// In memory where the machine has a tmpfs (/dev/shm on Linux): the simulation crashes processes,
// not the machine, so what fsync buys (surviving a power loss) is not what it checks, and
// fsyncs to a disk were most of its time; links, renames and create-only opens behave the same.
const base = (() => {
  try {
    accessSync('/dev/shm', constants.W_OK);
    return '/dev/shm';
  } catch {
    return tmpdir();
  }
})();
afterAll(async () => {
  await Promise.all(directories.map((directory) => rm(directory, { recursive: true, force: true })));
});

defineProtocolSimulation({
  name: 'file store',
  makeWorld: async (pick) => {
    const directory = await mkdtemp(join(base, 'tailgate-simulation-'));
    directories.push(directory);
    return new World(pick, directory);
  },
  runs: Math.ceil(Number(process.env.SIMULATION_RUNS ?? 300) / 10),
  report: false,
  // A bound, not a measure: the file store does real I/O at every one of many crash points.
  crashTimeoutMs: 600_000,
});

async function fileStore(): Promise<FileStore> {
  const directory = await mkdtemp(join(base, 'tailgate-fork-simulation-'));
  directories.push(directory);
  return new FileStore(directory);
}

defineForkSimulation('file store', fileStore);
defineRewindSimulation('file store', fileStore);
// A bound, not a measure: the delete that flattens is crashed at each of its calls, a first view's among them.
defineFlattenSimulation('file store', fileStore, 600_000);
