// Shard's service worker (docs/NOTIFICATIONS.md). Its scope is this origin's
// page and nothing else; it caches nothing and answers no fetch: the daemon
// is the only source of the page and of every agent's state, so an installed
// app is the same page as a tab. It is what a browser installs the app with,
// and where Web Push will land.
"use strict";

self.addEventListener("install", () => {
  // A new version takes over at once: there is no cache to migrate.
  self.skipWaiting();
});

self.addEventListener("activate", (event) => {
  event.waitUntil(self.clients.claim());
});
