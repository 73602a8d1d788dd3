import { defineConfig } from '@playwright/test';
import base from './playwright.config';

// The browser benchmark (scripts/bench-browser): figures printed, nothing
// timed asserted. One worker, so nothing else competes for the two cores.
export default defineConfig({
  ...base,
  testDir: './bench',
  testMatch: '**/*.bench.ts',
  timeout: 900_000,
  workers: 1,
});
