// The dashboard's service worker: what makes it an app a phone can install, and
// where a notification's tap lands. It caches nothing: every request, the page's
// own files included, goes to the server, so a revoked device or a stopped listener
// is never shown a stale inbox.

self.addEventListener("install", () => self.skipWaiting());
self.addEventListener("activate", (e) => e.waitUntil(self.clients.claim()));

// A tap on one of the page's notifications: the dashboard in front, opened if no
// window has it.
self.addEventListener("notificationclick", (e) => {
  e.notification.close();
  e.waitUntil((async () => {
    const windows = await self.clients.matchAll({ type: "window", includeUncontrolled: true });
    const open = windows.find((w) => new URL(w.url).origin === self.location.origin);
    if (open) return open.focus();
    return self.clients.openWindow("/");
  })());
});
