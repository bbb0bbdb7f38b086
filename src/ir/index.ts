// Shared types and enums: the vocabulary every layer speaks.
export * from "./enums.ts";
export * from "./dtypes.ts";
export * from "./errors.ts";
export * from "./time.ts";
export * from "./spec.ts";
