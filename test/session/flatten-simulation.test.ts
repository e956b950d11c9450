import { MemoryStore } from '../../lib/store/memory.ts';
import { defineFlattenSimulation } from './flatten-simulation-suite.ts';

// The flattening delete's simulation on the memory store, in a file of its own beside
// test/session/protocol-simulation.test.ts (it takes about as long as the rest of that file).
// A bound, not a measure, as the protocol simulation's: many crash points, each a history.
defineFlattenSimulation('memory store', async () => new MemoryStore(), 300_000);
