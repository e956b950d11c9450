import { env } from 'cloudflare:test';
import { R2Store } from '../../lib/store/r2.ts';
import { defineObjectStoreConformance } from '../store/object-store-conformance.ts';

defineObjectStoreConformance('r2 binding', () => new R2Store((env as { BUCKET: R2Bucket }).BUCKET));
