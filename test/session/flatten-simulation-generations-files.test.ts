import { FileStore } from '../../lib/store/file.ts';
import { simulationDirectories } from '../support/simulation-directories.ts';
import { defineFlattenSimulation } from './flatten-simulation-suite.ts';

// The flattening delete's simulation on the file store, a history in each of two files that run
// side by side (the longest simulation of all). A bound, not a measure: the delete is crashed at
// each of its calls, a first view's among them.
const directory = simulationDirectories('tailgate-flatten-simulation-');
defineFlattenSimulation('file store', async () => new FileStore(await directory()), 600_000, [
  'copies every generation',
]);
