/** The file to run for source module `sourcePath` of the project at `root`: its compiled copy if fresh, else the source. */
export function runnable(root: string, sourcePath: string): string;
