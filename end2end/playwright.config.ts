import { defineConfig } from '@playwright/test';

// Chromium comes from Debian (/usr/bin/chromium): Playwright never downloads a
// browser here. The flags keep it off the network this machine does not have.
export default defineConfig({
  testDir: './tests',
  timeout: 60_000,
  expect: { timeout: 15_000 },
  // Each worker runs its own daemon; two cores fit two workers.
  workers: process.env.CI ? 1 : 2,
  retries: 0,
  // A `test.only` left in a commit would quietly skip the rest on CI.
  forbidOnly: !!process.env.CI,
  reporter: [['list']],
  outputDir: './test-results',
  use: {
    browserName: 'chromium',
    trace: 'retain-on-failure',
    screenshot: 'only-on-failure',
    launchOptions: {
      executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    },
  },
});
