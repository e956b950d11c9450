// The Node built-ins lib/ imports, as Workers provide them under the nodejs_compat flag of
// wrangler.toml. tsconfig.lib.json checks lib/ against the Workers types and this file alone,
// so lib/ cannot reach for another Node API (or a Node global) unnoticed; adding one here
// means checking that workerd provides it.
declare module 'node:crypto' {
  interface Hash {
    update(data: string | Uint8Array, encoding?: 'utf8'): Hash;
    digest(encoding: 'hex'): string;
  }
  export function createHash(algorithm: 'md5' | 'sha256'): Hash;
}
