import { defineConfig } from 'vite';

// The dashboard is served by oduflow-master under /ui/ with a strict
// Content-Security-Policy (script-src 'self', no inline code, no data: URLs):
// no module-preload polyfill (Vite would inline it), nothing inlined as a
// data: URL, one hashed JS and one hashed CSS file.
export default defineConfig({
  base: '/ui/',
  oxc: { jsx: { runtime: 'automatic', importSource: 'preact' } },
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    target: 'es2022',
    sourcemap: true,
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    cssCodeSplit: false,
  },
});
