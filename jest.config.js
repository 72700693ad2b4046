/**
 * One Jest run for the whole workspace, so `pnpm test` prints a single summary.
 * Workspace packages resolve to their TypeScript sources through the `@tollway/source`
 * export condition, so tests never need a prior build.
 */
/** @type {import('jest').Config} */
module.exports = {
  testEnvironment: 'node',
  testEnvironmentOptions: {
    customExportConditions: ['@tollway/source', 'node', 'node-addons'],
  },
  roots: ['<rootDir>/packages', '<rootDir>/services', '<rootDir>/scripts'],
  testMatch: ['**/*.test.ts'],
  testPathIgnorePatterns: ['/node_modules/', '/dist/'],
  transform: {
    '^.+\\.ts$': [
      '@swc/jest',
      {
        jsc: { parser: { syntax: 'typescript' }, target: 'es2022' },
        module: { type: 'commonjs' },
        sourceMaps: 'inline',
      },
    ],
  },
  moduleNameMapper: { '^(\\.{1,2}/.*)\\.js$': '$1' },
  maxWorkers: 2,
  testTimeout: 30000,
};
