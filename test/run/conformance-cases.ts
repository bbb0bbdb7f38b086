// The suite's conformance cases, shared by the files that run them side by side.
import { loadPresets } from "../../src/run/conformance.ts";

export const CASES = Number(process.env.CCSIM_CONFORMANCE_CASES ?? 160);
export const SEED = Number(process.env.CCSIM_CONFORMANCE_SEED ?? 20261202);
export const CASE_TIMEOUT_MS = 300_000;
export const specs = loadPresets();

/** The first half of a case list (the rest is `secondHalf`'s). */
export const firstHalf = <T>(xs: readonly T[]): readonly T[] => xs.slice(0, Math.ceil(xs.length / 2));
export const secondHalf = <T>(xs: readonly T[]): readonly T[] => xs.slice(Math.ceil(xs.length / 2));
