// Shard's service worker (docs/NOTIFICATIONS.md). Its scope is this origin's
// page and nothing else; it caches nothing and answers no fetch: the daemon
// is the only source of the page and of every agent's state, so an installed
// app is the same page as a tab. It is what a browser installs the app with,
// and where the daemon's pushes land: it shows them, closes them when their
// question has closed, and runs a notification's Allow or Deny.
"use strict";

self.addEventListener("install", () => {
  // A new version takes over at once: there is no cache to migrate.
  self.skipWaiting();
});

self.addEventListener("activate", (event) => {
  event.waitUntil(self.clients.claim());
});

// A question's notification has the tag the daemon gives it, the one the
// page's own notification of it has, so that one replaces the other instead
// of showing twice. It names the agent and the question: two agents'
// questions of the same request id each keep their own, and one's end closes
// only its own.
function tagOf(data) {
  if (data.tag) return data.tag;
  // A push of a daemon from before tags were sent.
  if (data.request_id) return data.request_id;
  if (data.kind === "error") return `error:${data.agent_id}`;
  return "shard";
}

async function closeTagged(tag) {
  const shown = await self.registration.getNotifications({ tag });
  for (const notification of shown) notification.close();
}

// Every push shows a notification (browsers require it of a push that
// asked to be visible); one that only closes another shows its end and
// closes at once.
async function received(data) {
  if (!data || data.v !== 1) {
    return self.registration.showNotification("Shard", {
      body: "Something needs you in Shard.",
      tag: "shard",
    });
  }
  const tag = tagOf(data);
  if (data.kind === "closed") {
    await self.registration.showNotification("Answered", { tag, silent: true });
    return closeTagged(tag);
  }
  const actions = (data.actions || []).map(({ action, title }) => ({ action, title }));
  const tokens = Object.fromEntries((data.actions || []).map(({ action, token }) => [action, token]));
  return self.registration.showNotification(data.title || "Shard", {
    body: data.body || "",
    tag,
    renotify: true,
    requireInteraction: data.kind === "question",
    icon: "/icon-192.png",
    badge: "/icon-192.png",
    timestamp: data.at,
    actions,
    data: { kind: data.kind, agent_id: data.agent_id, request_id: data.request_id, agent: data.agent, tag, tokens },
  });
}

self.addEventListener("push", (event) => {
  let data = null;
  try {
    data = event.data ? event.data.json() : null;
  } catch {
    data = null;
  }
  event.waitUntil(received(data));
});

// The page, on screen or opened, with the agent the notification was about.
async function openApp(data) {
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const agent = data && data.agent_id;
  for (const client of windows) {
    if (agent) client.postMessage(`shard.open:${agent}`);
    return client.focus();
  }
  return self.clients.openWindow(agent ? `/#agent=${encodeURIComponent(agent)}` : "/");
}

// Runs an Allow or Deny: the daemon takes it once, for exactly the call the
// notification showed, and says so; else why not.
async function act(token, data) {
  const tag = tagOf(data);
  const agent = data.agent || "The agent";
  let response;
  try {
    response = await fetch("/push/act", {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ token }),
    });
  } catch {
    return self.registration.showNotification(`${agent}: not answered`, {
      body: "Shard could not be reached. Open it to answer.",
      tag,
      data: { agent_id: data.agent_id },
    });
  }
  const answer = await response.json().catch(() => ({}));
  if (response.ok) {
    await self.registration.showNotification(answer.decision === "allow" ? "Allowed" : "Denied", {
      tag,
      silent: true,
    });
    return closeTagged(tag);
  }
  return self.registration.showNotification(`${agent}: not answered`, {
    body: answer.message || `Refused (${response.status}). Open Shard to answer.`,
    tag,
    data: { agent_id: data.agent_id },
  });
}

// A click on a notification or one of its actions: Allow and Deny answer
// from here; anything else opens the page on the agent.
async function clicked(notification, action) {
  const data = notification.data || {};
  notification.close();
  const token = action && data.tokens && data.tokens[action];
  return token ? act(token, data) : openApp(data);
}

self.addEventListener("notificationclick", (event) => {
  event.waitUntil(clicked(event.notification, event.action));
});
