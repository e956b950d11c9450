// Copies the files the Worker serves as static assets into .assets/ (run before start and
// build). A file already there with the same bytes is left alone: `wrangler dev` watches
// .assets/ and restarts its worker on any write, so a second `npm start` would restart the
// first one's worker mid-request.
import { copyFileSync, existsSync, mkdirSync, readFileSync } from 'node:fs';

const source = 'node_modules/@scalar/api-reference/dist/browser/standalone.js';
const target = '.assets/docs/scalar-api-reference.js';
mkdirSync('.assets/docs', { recursive: true });
if (!existsSync(target) || !readFileSync(target).equals(readFileSync(source))) copyFileSync(source, target);
