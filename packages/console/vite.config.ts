import { defaultClientConditions, defineConfig } from 'vite';

// Served by the gateway at /console/. Workspace packages resolve to their TypeScript sources
// (the `@tollway/source` condition), so the console builds without building them first.
export default defineConfig({
  base: '/console/',
  resolve: { conditions: ['@tollway/source', ...defaultClientConditions] },
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // The gateway's CSP has no 'unsafe-inline': no asset may be inlined as a data: script.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: 'es2022',
  },
});
