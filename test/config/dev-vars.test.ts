import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { refuseDevVars } from '../support/dev-vars.ts';

describe('refuseDevVars', () => {
  const dirs: string[] = [];
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
  });
  const checkout = (files: string[]) => {
    const dir = mkdtempSync(join(tmpdir(), 'tailgate-dev-vars-'));
    dirs.push(dir);
    for (const name of files) writeFileSync(join(dir, name), 'DEFAULT_MODEL=openai:gpt-4.1-mini\n');
    return dir;
  };

  it('stops the tests beside a .dev.vars, naming the file npm start reads instead', () => {
    expect(() => refuseDevVars(checkout(['.dev.vars']))).toThrow(/rename it \.dev\.vars\.local/);
  });

  it('lets them run beside a .dev.vars.local, or none', () => {
    expect(() => refuseDevVars(checkout(['.dev.vars.local']))).not.toThrow();
    expect(() => refuseDevVars(checkout([]))).not.toThrow();
  });
});
