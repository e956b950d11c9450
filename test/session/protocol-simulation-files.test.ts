import { World } from '../support/simulation.ts';
import { simulationDirectories } from '../support/simulation-directories.ts';
import { FileStore } from '../../lib/store/file.ts';
import { defineForkSimulation } from './fork-simulation-suite.ts';
import { defineRewindSimulation } from './rewind-simulation-suite.ts';
import { defineProtocolSimulation } from './protocol-simulation-suite.ts';

// The protocol simulation on the file store: each actor writes through a FileStore of its own on
// one directory, so their writes contend through the lock files as several processes' would,
// with real I/O overlapping. A tenth of the memory store's interleavings.
const worldDirectory = simulationDirectories('tailgate-simulation-');
const storeDirectory = simulationDirectories('tailgate-fork-simulation-');

defineProtocolSimulation({
  name: 'file store',
  makeWorld: async (pick) => {
    return new World(pick, await worldDirectory());
  },
  runs: Math.ceil(Number(process.env.SIMULATION_RUNS ?? 300) / 10),
  report: false,
  // A bound, not a measure: the file store does real I/O at every one of many crash points.
  crashTimeoutMs: 600_000,
});

async function fileStore(): Promise<FileStore> {
  return new FileStore(await storeDirectory());
}

defineForkSimulation('file store', fileStore);
defineRewindSimulation('file store', fileStore);
// The flattening delete's simulation on the file store, the longest of all, runs in two files
// beside this one, a history each: test/session/flatten-simulation-*-files.test.ts.
