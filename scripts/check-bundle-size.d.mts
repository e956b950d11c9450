/** The types of scripts/check-bundle-size.mjs, for bench/bundle.ts. */
export declare const BUDGET_KIB: number;
export declare function measureBundle(directory: string): {
  modules: number;
  rawBytes: number;
  gzippedBytes: number;
};
