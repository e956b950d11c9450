import { World } from '../support/simulation.ts';
import { MemoryStore } from '../../lib/store/memory.ts';
import { defineForkSimulation } from './fork-simulation-suite.ts';
import { defineRewindSimulation } from './rewind-simulation-suite.ts';
import { defineProtocolSimulation } from './protocol-simulation-suite.ts';

// The protocol simulation on the memory store: every interleaving replays exactly from its seed.
// CI sets SIMULATION_RUNS (at least 2,000).
defineProtocolSimulation({
  name: 'memory store',
  makeWorld: async (pick) => new World(pick),
  runs: Number(process.env.SIMULATION_RUNS ?? 300),
  report: true,
  // A bound, not a measure: each operation's crash matrix takes 6 to 13 s alone on 2 cores and
  // can pass 30 s on a loaded machine; a run that stops making storage calls fails at once.
  crashTimeoutMs: 300_000,
});

defineForkSimulation('memory store', async () => new MemoryStore());

defineRewindSimulation('memory store', async () => new MemoryStore());

// The flattening delete's simulation on the memory store is test/session/flatten-simulation.test.ts:
// a file of its own, so that vitest runs it beside this one.
