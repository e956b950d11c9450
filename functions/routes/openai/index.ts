import { createRouter } from '../../router.ts';
import { chatRoutes } from './chat.ts';
import { compactResponseRoutes } from './compact.ts';
import { conversationRoutes } from './conversations.ts';
import { inputTokensRoutes } from './input-tokens.ts';
import { modelRoutes } from './models.ts';
import { responseRoutes } from './responses.ts';

/**
 * The OpenAI-compatible API: the routes the official clients call, over sessions. Errors on
 * these paths are answered in OpenAI's shape (./errors.ts, installed by functions/app.ts).
 */
export function openaiRoutes() {
  return createRouter()
    .route('/', compactResponseRoutes())
    .route('/', inputTokensRoutes())
    .route('/', responseRoutes())
    .route('/', conversationRoutes())
    .route('/', chatRoutes())
    .route('/', modelRoutes());
}
