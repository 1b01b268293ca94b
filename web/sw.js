// The dashboard's service worker: what makes it an app a phone can install, where
// Web Push arrives, and where a notification's tap or button lands. It caches
// nothing: every request, the page's own files included, goes to the server, so a
// revoked device or a stopped listener is never shown a stale inbox.

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));

// A push (src/push/notifier.rs says what one holds): a new request shown with its
// answers as buttons (Approve / Deny, or its options), or a request's end, which
// takes its notification away.
self.addEventListener("push", (e) => {
  let msg = null;
  try {
    msg = e.data ? e.data.json() : null;
  } catch (_) {
    msg = null;
  }
  e.waitUntil(onPush(msg));
});

async function onPush(msg) {
  if (!msg || typeof msg.id !== "string") return;
  if (msg.type === "ended") {
    for (const n of await self.registration.getNotifications({ tag: msg.id })) n.close();
    return;
  }
  const lines = [msg.question, msg.detail].filter(Boolean);
  const actions = Array.isArray(msg.actions) ? msg.actions : [];
  await self.registration.showNotification(msg.title || "hitl", {
    body: lines.join("\n"),
    tag: msg.id,
    renotify: true,
    requireInteraction: msg.priority === "urgent" || msg.priority === "high",
    icon: "/ui/icon-192.png",
    badge: "/ui/icon-192.png",
    actions: actions.map((a) => ({ action: a.action, title: a.title })),
    data: { id: msg.id, url: msg.url || "/", actions },
  });
}

// A tap: a button answers with the respond body the push carried, as this device
// (its session's cookie); the notification's body opens the request.
self.addEventListener("notificationclick", (e) => {
  e.notification.close();
  e.waitUntil(onNotificationClick(e.notification, e.action));
});

async function onNotificationClick(notification, action) {
  const data = notification.data || {};
  const chosen = (data.actions || []).find((a) => a.action === action);
  if (chosen && data.id) {
    const res = await fetch(`/api/v1/requests/${encodeURIComponent(data.id)}/respond`, {
      method: "POST",
      credentials: "same-origin",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(chosen.answer),
    }).catch(() => null);
    if (res && res.ok) return;
    // Not taken (logged out, answered elsewhere, offline): the request is shown.
  }
  return openPage(data.url || "/");
}

async function openPage(path) {
  const url = new URL(path, self.location.origin).href;
  const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
  const open = windows.find((w) => new URL(w.url).origin === self.location.origin);
  if (open) {
    await open.focus();
    return open.navigate ? open.navigate(url) : undefined;
  }
  return self.clients.openWindow(url);
}
