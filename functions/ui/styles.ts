/** The inspector's stylesheet (/ui/app.css). Colours keep WCAG AA contrast on white. */
export const INSPECTOR_CSS = `
:root { font-family: system-ui, sans-serif; color: #1a1a1a; background: #ffffff; }
body { margin: 0; }
.top { display: flex; align-items: center; justify-content: space-between; padding: 0.5rem 1rem; background: #12355b; }
.top h1 { font-size: 1.1rem; margin: 0; }
.top a { color: #ffffff; text-decoration: none; }
.top button { background: #ffffff; color: #12355b; }
main { padding: 1rem; }
button {
  font: inherit;
  padding: 0.3rem 0.7rem;
  border: 1px solid #12355b;
  background: #12355b;
  color: #ffffff;
  border-radius: 4px;
  cursor: pointer;
}
button.danger { background: #a4161a; border-color: #a4161a; }
button.toggle-original { background: #ffffff; color: #12355b; margin: 0 0.5rem; }
input, textarea {
  font: inherit;
  padding: 0.3rem;
  border: 1px solid #595959;
  border-radius: 4px;
  max-width: 100%;
  box-sizing: border-box;
}
textarea { width: 100%; }
label { display: block; font-weight: 600; margin-top: 0.4rem; }
.row { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: center; }
.row label { display: inline; margin: 0; }
table { border-collapse: collapse; width: 100%; margin-top: 0.5rem; }
th, td { text-align: left; padding: 0.3rem 0.5rem; border-bottom: 1px solid #d0d0d0; }
.muted { color: #555555; }
.error { color: #a4161a; }
/* A part the token may not use stays hidden whatever display its class gives it. */
[hidden] { display: none !important; }
.visually-hidden {
  position: absolute;
  width: 1px;
  height: 1px;
  overflow: hidden;
  clip: rect(0 0 0 0);
  white-space: nowrap;
}
.columns {
  display: grid;
  grid-template-columns: minmax(0, 2fr) minmax(16rem, 1fr);
  grid-template-rows: auto 1fr;
  grid-template-areas: "timeline chat" "timeline side";
  gap: 0 1.5rem;
}
.timeline-column { grid-area: timeline; }
#chat-section { grid-area: chat; }
.side-column { grid-area: side; }
.timeline { list-style: none; padding: 0; margin: 0; }
.turn { border: 1px solid #d0d0d0; border-radius: 4px; margin: 0.3rem 0; padding: 0.3rem 0.6rem; }
.turn summary { cursor: pointer; }
.status-failed, .status-aborted { border-left: 4px solid #a4161a; }
.status-completed { border-left: 4px solid #1b6e3a; }
.mark { font-weight: 600; color: #6b3a00; }
.error-mark { color: #a4161a; }
.items { list-style: none; padding: 0; }
.item { border-top: 1px dashed #d0d0d0; padding: 0.2rem 0; }
.item pre, #chat-output { white-space: pre-wrap; word-break: break-word; margin: 0.2rem 0; font-size: 0.85rem; }
.seq { font-family: ui-monospace, monospace; color: #555555; margin-right: 0.5rem; }
.treatment-dropped { background: #f0f0f0; color: #555555; }
.treatment-compacted .compacted-text { background: #fff4d6; }
.original-text { background: #e8f1fb; }
.runs { font-family: ui-monospace, monospace; font-size: 0.8rem; }
#strip-chart svg, #cost-chart svg { width: 100%; height: 80px; background: #fafafa; border: 1px solid #d0d0d0; }
#cost-chart svg { height: 60px; }
.chart { display: grid; grid-template-columns: auto minmax(0, 1fr); column-gap: 0.3rem; }
.axis-y { display: flex; flex-direction: column; justify-content: space-between; text-align: right; }
.axis-x { grid-column: 2; display: flex; justify-content: space-between; }
.axis-y, .axis-x, .legend { font-size: 0.75rem; color: #555555; }
.legend { list-style: none; display: flex; flex-wrap: wrap; gap: 0 1rem; padding: 0; margin: 0.2rem 0 0.5rem; }
.swatch { display: inline-block; width: 0.7rem; height: 0.7rem; margin-right: 0.3rem; vertical-align: middle; }
.swatch-total { background: #9a9a9a; }
.swatch-reused, .swatch-cache { background: #1f5fa8; }
.swatch-cost { background: #2e7d32; }
.collapsible button { background: #ffffff; color: #12355b; }
.bar-total { fill: #9a9a9a; }
.bar-reused, .bar-cache { fill: #1f5fa8; }
.bar-cost { fill: #2e7d32; }
.media { display: flex; flex-wrap: wrap; gap: 0.5rem; align-items: flex-start; font-size: 0.8rem; }
.media figure { margin: 0; }
.thumb { display: block; max-width: 160px; max-height: 120px; border: 1px solid #d0d0d0; }
.image-pruned .thumb { opacity: 0.45; border-style: dashed; }
.live { border: 1px dashed #1f5fa8; border-radius: 4px; padding: 0.3rem 0.6rem; }
.live-text { white-space: pre-wrap; margin: 0.2rem 0; }
.counts { display: grid; grid-template-columns: auto auto; gap: 0.1rem 1rem; }
.counts dd { margin: 0; font-variant-numeric: tabular-nums; }
.field { display: inline-block; margin-right: 0.5rem; }
.hint { font-size: 0.8rem; margin: 0.1rem 0 0.3rem; }
#chat-attached:empty, #chat-output:empty { display: none; }
#chat-attached .thumb { max-height: 48px; }
.field input { width: 7rem; }
/* One column: the chat box follows the timeline, kept at the viewport's bottom while the timeline scrolls by. */
@media (max-width: 50rem) {
  .columns { grid-template-columns: 1fr; grid-template-rows: none; grid-template-areas: "timeline" "chat" "side"; }
  /* What scrolls into view (by focus, find or a link) stops above the box, not under it (--chat-height: chat.ts). */
  html { scroll-padding-bottom: var(--chat-height, 0px); }
  #chat-section {
    position: sticky;
    bottom: 0;
    z-index: 1;
    background: #ffffff;
    border-top: 1px solid #d0d0d0;
    padding-bottom: 0.3rem;
  }
  #chat-section h3 { margin: 0.3rem 0; font-size: 1rem; }
  #chat-section .hint { display: none; }
  #chat-section label[for="chat-input"] {
    position: absolute;
    width: 1px;
    height: 1px;
    overflow: hidden;
    clip: rect(0 0 0 0);
  }
  #chat-input { height: 3.5rem; }
  #chat-output { max-height: 30vh; overflow-y: auto; }
}
`;
