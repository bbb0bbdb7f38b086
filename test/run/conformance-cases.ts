// The suite's conformance cases, shared by the files that run them side by side.
import { loadPresets } from "../../src/run/conformance.ts";

export const CASES = Number(process.env.CCSIM_CONFORMANCE_CASES ?? 160);
export const SEED = Number(process.env.CCSIM_CONFORMANCE_SEED ?? 20261203);
export const CASE_TIMEOUT_MS = 300_000;
export const specs = loadPresets();

/**
 * The suite's matrix draws groups of up to 64 ranks: a case above that checks values over
 * thousands of queues (a 120-rank mesh runs minutes with race detection), so the suite proves the
 * matrix's properties on cases that exercise them in seconds, and `npm run conformance` (up to 128
 * ranks) and the scenarios (up to 1,024 ranks) take the big ones; conformance-b.test.ts runs a few
 * cases of 65 to 128 ranks timing only.
 */
export const MATRIX = { maxBytes: 1 << 20, maxCheckedPayload: 64 << 20, maxRanks: 64 } as const;

/** The first half of a case list (the rest is `secondHalf`'s). */
export const firstHalf = <T>(xs: readonly T[]): readonly T[] => xs.slice(0, Math.ceil(xs.length / 2));
export const secondHalf = <T>(xs: readonly T[]): readonly T[] => xs.slice(Math.ceil(xs.length / 2));
