import { type ContentPart, imagePlaceholder } from '../content.ts';
import type { PromptItem } from '../items.ts';
import { callsBeforeImage } from './aggregates.ts';
import { historyFor } from './apply-epoch-plan.ts';
import type { HistoryIndex } from './history-index.ts';
import type { Strategy } from './strategy.ts';
import { type StrategyConfig, strategyConfigFieldsSchema } from './strategy-config.ts';

/**
 * How many of the newest images of a history of `images` stay whole: all of them up to
 * `full_images`, then `full_images + (images - full_images) mod image_epoch_size`. The
 * boundary (the newest pruned image) moves only every `image_epoch_size` new images, so
 * between moves the pruned images, and the prompt before the whole ones, stay byte-identical.
 *
 * Example (full 3, size 5): 3 images -> 3 whole; 4 -> 4; 7 -> 7; 8 -> 3 (5 pruned); 12 -> 7;
 * 13 -> 3 (10 pruned).
 */
export function wholeImages(images: number, config: StrategyConfig): number {
  const full = config.full_images;
  if (images <= full) return images;
  return full + ((images - full) % config.image_epoch_size);
}

/**
 * `shorten_images`: keeps the newest {@link wholeImages} images of the history whole and
 * replaces every older `input_image` part (in message contents and in function_call_output
 * parts) with an `input_text` part holding `imagePlaceholder` (lib/content.ts), the text a
 * provider adapter sends for an image its provider does not take, so pruning such an image
 * changes no byte of the request. Images are counted
 * newest-first over the whole history, whatever earlier strategies of the list did to their
 * items, so the boundary depends on the history alone. The images of the newest turn's input
 * (`StrategyContext.inputFromSeq` on) are counted but never pruned (with `full_images` 0 every
 * image is). An item with a pruned image is a new
 * object with `compacted: true`; everything else is kept as it is. Synthetic items (notices)
 * are not the history's and are left alone.
 *
 * A pruned image's blob is never read: the turn reads only the parts of the prompt it sends.
 */
export const shortenImages: Strategy = {
  name: 'shorten_images',
  configSchema: strategyConfigFieldsSchema.pick({ full_images: true, image_epoch_size: true }),
  apply(items, config, context) {
    const { history, items: input } = historyFor(items, context);
    const whole = wholeImages(history.images, config);
    if (whole >= history.images) return [...input];
    // `full_images` 0 sends no image at all, the newest input's neither.
    const inputFrom = config.full_images > 0 ? (context.inputFromSeq ?? Infinity) : Infinity;
    return input.map((item) => pruneItem(item, whole, history, inputFrom));
  },
  tailRequirement: () => null,
  tailCalls(config, aggregates) {
    const whole = wholeImages(aggregates.images, config);
    if (whole === 0) return 0;
    // The tail must hold every call from the one before the oldest whole image on.
    return aggregates.tool_calls - Math.max(callsBeforeImage(aggregates, whole), 1) + 1;
  },
};

function pruneItem(item: PromptItem, whole: number, history: HistoryIndex, inputFrom: number): PromptItem {
  const last = history.imagePosition(item);
  if (last === undefined || item.synthetic !== undefined || (item.seq ?? 0) >= inputFrom) return item;
  if (item.type === 'function_call') return item;
  const parts = item.type === 'message' ? item.content : item.output;
  if (typeof parts === 'string') return item;
  let position = last;
  let changed = false;
  const pruned: ContentPart[] = new Array(parts.length);
  for (let index = parts.length - 1; index >= 0; index -= 1) {
    const part = parts[index]!;
    pruned[index] = part;
    if (part.type !== 'input_image') continue;
    if (position > whole) {
      pruned[index] = { type: 'input_text', text: imagePlaceholder(part, item.seq) };
      changed = true;
    }
    position += 1;
  }
  if (!changed) return item;
  const copy: PromptItem =
    item.type === 'message'
      ? { ...item, content: pruned, compacted: true }
      : { ...item, output: pruned, compacted: true };
  history.derive(item, copy);
  return copy;
}
