import type { LogScope } from '../session/keys.ts';
import type { ForkSketch } from '../session/session-log.ts';
import { checkCalls } from '../session/log/open-calls.ts';
import { continuation } from './create-response.ts';
import type { Facade } from './facade.ts';
import { checkHeldIds, heldAtBranch } from './held-ids.ts';
import { namedInRequest, type PreparedRequest } from './request.ts';
import { branchResentAfter } from './resent-after.ts';
import { branchRefused } from './sessions.ts';
import { keptObject } from './stored-responses.ts';

/**
 * Where a count (./input-tokens.ts) naming a previous_response_id that is not its conversation's
 * newest goes, as a create naming it branches (./create-response.ts), nothing written: a loop's
 * later step goes on in the branch its first step made (./resent-after.ts branchResentAfter), after
 * that branch's newest turn (or after the failed attempts of the step it retries there), its
 * input's items stored as sent; any other request goes to the fork the create would make at that
 * response (./sessions.ts branchedSession), sketched, not written (SessionLog.sketchFork): the
 * history up to that response, its context start and overflow boundary there, the instructions
 * that response ran with (its kept object's; without one, the conversation's), the calls open there;
 * an item sent with the id of one that fork would hold is refused first, as the create refuses it.
 * A response that cannot be forked at is the create's 409 conversation_branching_unsupported.
 */
export async function countedBranch(
  facade: Facade,
  prepared: PreparedRequest,
  /** That response's conversation, its turn, and the scope it was read under. */
  at: { sessionId: string; turn: number; scope: LogScope },
  tag: string,
  /** The input resent every item since that response (./resent-after.ts resentAfter): no loop's branch is sought. */
  resent: boolean,
): Promise<
  | { sessionId: string; after: { known: number; taken?: number | undefined; branch: true } }
  | { sessionId: ForkSketch; after: Record<string, never> }
> {
  const id = prepared.body.previous_response_id!;
  // A branch is a new conversation: a token that may start none is refused it.
  facade.authorize(null);
  const ongoing = resent ? undefined : await branchResentAfter(facade, at.sessionId, at.turn, prepared, tag);
  const inBranch = ongoing && (await continuation(facade, ongoing.sessionId, ongoing, prepared, false));
  if (ongoing && inBranch)
    return { sessionId: ongoing.sessionId, after: { known: inBranch.known, taken: inBranch.taken, branch: true } };
  const kept = await keptObject(facade, id);
  // An item sent with the id of one the branch would hold: the create's 400, before it forks.
  checkHeldIds(prepared, prepared.positions.items, heldAtBranch(at.scope, id, kept));
  const instructions = kept ? { instructions: typeof kept.instructions === 'string' ? kept.instructions : null } : {};
  const sketch = await facade.services.sessions
    .sketchFork(at.sessionId, { at_turn: at.turn, fields: instructions })
    .catch((error: unknown) => {
      throw branchRefused(id, error);
    });
  return { sessionId: sketch, after: {} };
}

/**
 * The items of `prepared` the first turn of a fork (`sketch`) would take: all of its input, checked
 * against the calls open at the fork point (an output answering none is the 400 its claim answers).
 */
export function forkInput(
  prepared: PreparedRequest,
  sketch: ForkSketch,
): { items: PreparedRequest['items']; positions: number[] } {
  const { items } = prepared;
  const positions = prepared.positions.items;
  try {
    if (sketch.openCalls) checkCalls(items, sketch.openCalls);
  } catch (error) {
    throw namedInRequest(error, positions);
  }
  return { items, positions };
}
