// Reports: nccom-test tables and JSON.
export * from "./table.ts";
