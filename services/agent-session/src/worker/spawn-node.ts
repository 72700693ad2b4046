import { fork, type ChildProcess, type ForkOptions } from 'node:child_process';

/**
 * Forks a Node process running `file`: a `.ts` file (development, tests) runs through tsx with the
 * `@tollway/source` condition so workspace packages resolve to their sources; a `.js` file
 * (the build) runs on plain node.
 */
export function forkNodeFile(file: string, options: Omit<ForkOptions, 'execArgv'> = {}): ChildProcess {
  const execArgv = file.endsWith('.ts') ? ['--conditions=@tollway/source', '--import', 'tsx'] : [];
  return fork(file, [], { ...options, execArgv });
}

/** The file next to this module's own file named `name` (`turn-child` → `turn-child.ts` or `.js`). */
export function siblingFile(dirname: string, filename: string, name: string): string {
  const extension = filename.endsWith('.ts') ? '.ts' : '.js';
  return `${dirname}/${name}${extension}`;
}
