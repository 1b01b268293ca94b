// Web Push on this device: the header's "Push" button subscribes this browser
// (the server's VAPID key, then its PushSubscription posted to the server), so
// each new request reaches it with the page closed, on a phone's lock screen; sw.js
// shows the push and answers from its buttons. Pressed again, it unsubscribes.

import { $ } from "/ui/dom.js";

const button = $("push");

/** The base64url VAPID key as the bytes `pushManager.subscribe` takes. */
function keyBytes(b64) {
  const s = atob(b64.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (b64.length % 4)) % 4));
  return Uint8Array.from(s, (c) => c.charCodeAt(0));
}

async function registration() {
  return navigator.serviceWorker.ready;
}

async function show() {
  const sub = await (await registration()).pushManager.getSubscription();
  button.textContent = sub ? "Push on" : "Push off";
  button.setAttribute("aria-pressed", String(Boolean(sub)));
  button.title = sub ? "New requests are pushed to this device; press to stop"
    : "Push new requests to this device, with the page closed";
}

async function toggle() {
  const reg = await registration();
  const sub = await reg.pushManager.getSubscription();
  if (sub) {
    await fetch(`/api/v1/push/subscriptions?endpoint=${encodeURIComponent(sub.endpoint)}`, {
      method: "DELETE", credentials: "same-origin",
    }).catch(() => {});
    await sub.unsubscribe();
    return;
  }
  if ((await Notification.requestPermission()) !== "granted") {
    throw new Error("notifications are not allowed for this page");
  }
  const key = await (await fetch("/api/v1/push/vapid", { credentials: "same-origin" })).json();
  const made = await reg.pushManager.subscribe({
    userVisibleOnly: true,
    applicationServerKey: keyBytes(key.public_key),
  });
  const res = await fetch("/api/v1/push/subscriptions", {
    method: "POST",
    credentials: "same-origin",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(made.toJSON()),
  });
  if (!res.ok) {
    await made.unsubscribe();
    const why = await res.json().catch(() => ({}));
    throw new Error(why.error || `refused (${res.status})`);
  }
}

/** Shows the button where this browser can be pushed to (a service worker, Push, a secure page). */
export function startPush() {
  if (!("serviceWorker" in navigator) || !("PushManager" in window) || !window.isSecureContext) return;
  button.hidden = false;
  show().catch(() => {});
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      await toggle();
    } catch (e) {
      button.title = `Push: ${e.message || e}`;
    } finally {
      button.disabled = false;
      await show().catch(() => {});
    }
  });
}
