/**
 * The inbox (consume-once notices on an ObjectStore, docs/ARCHITECTURE.md "Inbox"): the only
 * module the rest of lib/ and functions/ import of lib/inbox/ (scripts/check-imports.mjs).
 */
export { Inbox } from './inbox.ts';
export type { DeliveredNotice, InboxAbort, InboxLogEvent } from './types.ts';
export { currentNotices, type FetchedNotice } from './delivery-records.ts';
export { ABORT_NOTICE_NAME } from './notice-name.ts';
export { consumeForModelCall } from './model-call.ts';
