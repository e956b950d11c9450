import { MemoryStore } from '../../lib/store/memory.ts';
import { defineObjectStoreConformance } from './object-store-conformance.ts';

defineObjectStoreConformance('memory', () => new MemoryStore());
