// Reference collectives and comparison.
export * from "./values.ts";
