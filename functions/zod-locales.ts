/**
 * zod's `locales` in the Worker bundle (wrangler.toml [alias] puts it in place of zod's
 * locales index): English only, the language zod's messages use by default. Nothing in
 * tailgate or its dependencies selects another language.
 */
export { default as en } from 'zod/v4/locales/en.js';
