import { MemoryStore } from '../../lib/store/memory.ts';
import { defineSessionIndexRaces } from './session-index-races.ts';
import { defineSessionIndexSuite } from './session-index-suite.ts';

// The suite on memory; session-index-s3.test.ts runs it on S3.
defineSessionIndexSuite('memory', () => new MemoryStore());
// Upload times that tie, as S3's (whole seconds) do for writes close together.
const uploaded = new Date('2026-01-01T00:00:00Z');
defineSessionIndexSuite('memory, one upload time', () => new MemoryStore({ clock: () => uploaded }));
defineSessionIndexRaces('memory', () => new MemoryStore(), 400);
defineSessionIndexRaces('memory, one upload time', () => new MemoryStore({ clock: () => uploaded }), 400);
// A charge put as a delete of the newest turn read the session, which carries it after writing the row.
defineSessionIndexRaces('memory, a charge carried by a delete of the newest turn', () => new MemoryStore(), 1, 1731);
