import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';
import { clientOnTailgate, tailgateGet, tailgatePost } from './server.ts';

// A branch (previous_response_id naming a response that is not the conversation's newest) keeps
// its conversation's budget and counts its own turns from the branch point, as a fork does; one
// made once the conversation's budget is spent is refused as the conversation's next turn is.
const world = clientOnTailgate();

async function conversationWithBudget(id: string, maxTurns: number) {
  const created = await tailgatePost(world.tailgate.baseURL, '/sessions', { id, budget: { max_turns: maxTurns } });
  expect(created.status).toBe(201);
  const { client } = world;
  const first = await client.responses.create({ model: 'echo', input: 'one', conversation: id });
  await client.responses.create({ model: 'echo', input: 'two', conversation: id });
  return first;
}

describe('a branch of a conversation with a budget', () => {
  it('counts its own turns from the branch point, under the same limit', async () => {
    const first = await conversationWithBudget('branch-budget-room', 3);
    const branch = await world.client.responses.create({ model: 'echo', input: 'b1', previous_response_id: first.id });
    const branchId = branch.conversation!.id;
    expect(branchId).not.toBe('branch-budget-room');
    const session = await tailgateGet(world.tailgate.baseURL, `/sessions/${branchId}`);
    expect(session.budget).toEqual({ max_turns: 3 });
    expect(session.usage.turns).toBe(1);
    await world.client.responses.create({ model: 'echo', input: 'b2', previous_response_id: branch.id });
    const next = await world.client.responses.create({ model: 'echo', input: 'b3', conversation: branchId });
    expect(next.status).toBe('completed');
    const spent = await world.client.responses
      .create({ model: 'echo', input: 'b4', conversation: branchId })
      .catch((error: unknown) => error);
    expect(spent).toBeInstanceOf(OpenAI.APIError);
    expect((spent as InstanceType<typeof OpenAI.APIError>).status).toBe(402);
  });

  it('is refused once the conversation spent its budget, and no branch is made', async () => {
    const first = await conversationWithBudget('branch-budget-spent', 2);
    const before = await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100');
    const refused = await world.client.responses
      .create({ model: 'echo', input: 'branch', previous_response_id: first.id })
      .catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(OpenAI.APIError);
    const error = refused as InstanceType<typeof OpenAI.APIError>;
    expect(error.status).toBe(402);
    expect((error.error as { code?: string }).code).toBe('budget_exhausted');
    const after = await tailgateGet(world.tailgate.baseURL, '/sessions?limit=100');
    expect(after.sessions.map((row: { id: string }) => row.id)).toEqual(
      before.sessions.map((row: { id: string }) => row.id),
    );
  });
});
