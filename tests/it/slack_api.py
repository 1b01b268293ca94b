"""A stand-in for Slack's Web API and Socket Mode, written from Slack's documentation
(api.slack.com: apps.connections.open, chat.postMessage, chat.update,
chat.postEphemeral, views.open, the Block Kit reference, Socket Mode), for
tests/it/slack.rs.

It checks every call hitl makes against the documented methods, tokens, parameters,
types and limits, and records each one (with "error" when it broke a rule, answering
as Slack does: {"ok": false, "error": ...}). The test plays members' presses and
form submissions through the socket, as Slack delivers them in envelopes, and reads
the acknowledgements back.

Usage: slack_api.py APP_TOKEN BOT_TOKEN [CERT KEY]. Prints {"port": P, "control": C}
(the Web API at http://127.0.0.1:P/api/, and the same handler in plain http at C for
the test's own calls) once it listens; with a certificate and its key, the Web API and
the socket are served over TLS (https://, wss://), as Slack serves them.

Test endpoints: GET /test/calls; GET /test/connections (sockets opened so far);
POST /test/interactive with a payload (sent in an envelope, answered with the
app's acknowledgement within Slack's 3 seconds, or null); POST /test/disconnect
(Slack's refresh_requested).
"""

import asyncio
import json
import ssl
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import websockets

APP_TOKEN, BOT_TOKEN = sys.argv[1], sys.argv[2]
TLS = None
if len(sys.argv) > 4:
    TLS = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    TLS.load_cert_chain(sys.argv[3], sys.argv[4])
calls = []
lock = threading.Lock()
tickets = set()
triggers = {}  # trigger_id -> issued at
messages = {}  # (channel, ts) -> message
sockets = []
acks = {}  # envelope_id -> asyncio.Future
loop = None
ws_port = None
next_ts = [0]


class Refused(Exception):
    pass


def need(cond, error):
    if not cond:
        raise Refused(error)


def text_object(t, max_len, plain_only=False):
    need(isinstance(t, dict), "invalid_blocks: a text object is an object")
    need(t.get("type") in (("plain_text",) if plain_only else ("plain_text", "mrkdwn")),
         "invalid_blocks: text type must be plain_text" + ("" if plain_only else " or mrkdwn"))
    need(isinstance(t.get("text"), str) and 1 <= len(t["text"]) <= max_len,
         f"invalid_blocks: text must be 1 to {max_len} characters")
    if "emoji" in t:
        need(t["type"] == "plain_text" and isinstance(t["emoji"], bool),
             "invalid_blocks: emoji is a boolean of plain_text only")
    need(set(t) <= {"type", "text", "emoji", "verbatim"}, "invalid_blocks: unknown text field")


def element(e, action_ids):
    need(isinstance(e, dict), "invalid_blocks: an element is an object")
    kind = e.get("type")
    if kind == "button":
        text_object(e.get("text"), 75, plain_only=True)
        aid = e.get("action_id")
        need(isinstance(aid, str) and 1 <= len(aid) <= 255, "invalid_blocks: action_id 1 to 255")
        need(aid not in action_ids, "invalid_blocks: action_id repeated in a block")
        action_ids.add(aid)
        if "value" in e:
            need(isinstance(e["value"], str) and len(e["value"]) <= 2000, "invalid_blocks: value <= 2000")
        if "style" in e:
            need(e["style"] in ("primary", "danger"), "invalid_blocks: style is primary or danger")
        need(set(e) <= {"type", "text", "action_id", "value", "style", "url", "confirm",
                        "accessibility_label"}, "invalid_blocks: unknown button field")
    elif kind == "plain_text_input":
        aid = e.get("action_id")
        need(isinstance(aid, str) and 1 <= len(aid) <= 255, "invalid_blocks: action_id 1 to 255")
        if "multiline" in e:
            need(isinstance(e["multiline"], bool), "invalid_blocks: multiline is a boolean")
        need(set(e) <= {"type", "action_id", "multiline", "placeholder", "initial_value",
                        "min_length", "max_length", "focus_on_load",
                        "dispatch_action_config"}, "invalid_blocks: unknown input field")
    else:
        raise Refused(f"invalid_blocks: an element of type {kind!r} is not one hitl should send")


def blocks(bs, most, surface):
    need(isinstance(bs, list) and 1 <= len(bs) <= most, f"invalid_blocks: 1 to {most} blocks")
    for b in bs:
        need(isinstance(b, dict), "invalid_blocks: a block is an object")
        if "block_id" in b:
            need(isinstance(b["block_id"], str) and 1 <= len(b["block_id"]) <= 255,
                 "invalid_blocks: block_id 1 to 255")
        kind = b.get("type")
        if kind == "section":
            text_object(b.get("text"), 3000)
            need(set(b) <= {"type", "text", "block_id", "fields", "accessory"},
                 "invalid_blocks: unknown section field")
        elif kind == "actions":
            els = b.get("elements")
            need(isinstance(els, list) and 1 <= len(els) <= 25, "invalid_blocks: 1 to 25 elements")
            ids = set()
            for e in els:
                element(e, ids)
        elif kind == "context":
            els = b.get("elements")
            need(isinstance(els, list) and 1 <= len(els) <= 10, "invalid_blocks: 1 to 10 elements")
            for e in els:
                text_object(e, 3000)
        elif kind == "input":
            need(surface == "modal", "invalid_blocks: input blocks belong in modals")
            text_object(b.get("label"), 2000, plain_only=True)
            element(b.get("element"), set())
        else:
            raise Refused(f"invalid_blocks: block type {kind!r}")


def check(method, auth, ctype, p):
    token = APP_TOKEN if method == "apps.connections.open" else BOT_TOKEN
    need(auth == f"Bearer {token}", "invalid_auth" if auth.startswith("Bearer ") else "not_authed")
    # A JSON body without its charset is taken with a warning: hitl sends it.
    need(ctype.replace(" ", "").lower() == "application/json;charset=utf-8",
         "missing_charset: Content-type application/json; charset=utf-8")
    if method == "apps.connections.open":
        ticket = uuid.uuid4().hex
        tickets.add(ticket)
        scheme = "wss" if TLS else "ws"
        return {"url": f"{scheme}://127.0.0.1:{ws_port}/link/?ticket={ticket}&app_id=A1"}
    if method in ("chat.postMessage", "chat.update"):
        need(isinstance(p.get("channel"), str) and p["channel"], "channel_not_found")
        need("text" in p or "blocks" in p, "no_text")
        if "text" in p:
            need(isinstance(p["text"], str) and len(p["text"]) <= 40000, "msg_too_long")
        if "blocks" in p:
            blocks(p["blocks"], 50, "message")
        for flag in ("unfurl_links", "unfurl_media"):
            if flag in p:
                need(isinstance(p[flag], bool), f"invalid_arguments: {flag} is a boolean")
        known = {"channel", "text", "blocks", "unfurl_links", "unfurl_media", "mrkdwn"}
        if method == "chat.update":
            need(isinstance(p.get("ts"), str), "invalid_arguments: ts is a string")
            need((p["channel"], p["ts"]) in messages, "message_not_found")
            known |= {"ts"}
            need(set(p) <= known, f"invalid_arguments: {set(p) - known}")
            messages[(p["channel"], p["ts"])] = p
            return {"channel": p["channel"], "ts": p["ts"], "text": p.get("text", "")}
        need(set(p) <= known, f"invalid_arguments: {set(p) - known}")
        next_ts[0] += 1
        ts = f"1795860000.{next_ts[0]:06d}"
        messages[(p["channel"], ts)] = p
        return {"channel": p["channel"], "ts": ts, "message": {"type": "message", "text": p.get("text", ""), "ts": ts}}
    if method == "chat.postEphemeral":
        for k in ("channel", "user", "text"):
            need(isinstance(p.get(k), str) and p[k], f"invalid_arguments: {k}")
        need(set(p) <= {"channel", "user", "text", "blocks"}, "invalid_arguments")
        return {"message_ts": "1795860000.999999"}
    if method == "views.open":
        trigger = p.get("trigger_id")
        need(isinstance(trigger, str) and trigger in triggers, "invalid_trigger_id")
        need(time.time() - triggers.pop(trigger) < 3, "expired_trigger_id")
        v = p.get("view")
        need(isinstance(v, dict) and v.get("type") == "modal", "invalid_arguments: view type modal")
        text_object(v.get("title"), 24, plain_only=True)
        for k in ("submit", "close"):
            if k in v:
                text_object(v[k], 24, plain_only=True)
        blocks(v.get("blocks"), 100, "modal")
        if any(b.get("type") == "input" for b in v["blocks"]):
            need("submit" in v, "invalid_arguments: a modal with inputs needs submit")
        need(len(v.get("private_metadata", "")) <= 3000, "invalid_arguments: private_metadata")
        need(len(v.get("callback_id", "")) <= 255, "invalid_arguments: callback_id")
        need(set(v) <= {"type", "title", "blocks", "close", "submit", "private_metadata",
                        "callback_id", "clear_on_close", "notify_on_close", "external_id",
                        "submit_disabled"}, "invalid_arguments: unknown view field")
        return {"view": dict(v, id="V" + uuid.uuid4().hex[:8])}
    raise Refused("unknown_method")


async def send_envelope(envelope):
    need(sockets, "no socket open")
    fut = loop.create_future()
    acks[envelope["envelope_id"]] = fut
    await sockets[-1].send(json.dumps(envelope))
    try:
        return await asyncio.wait_for(fut, 3)
    except asyncio.TimeoutError:
        return None


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, code, body):
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/test/calls":
            with lock:
                self.reply(200, calls)
        elif self.path == "/test/connections":
            self.reply(200, {"opened": len(sockets)})
        else:
            self.reply(404, {"ok": False, "error": "unknown_method"})

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)) or 0)
        if self.path == "/test/interactive":
            payload = json.loads(body)
            if payload.get("type") == "block_actions":
                trigger = f"{int(time.time())}.1.{uuid.uuid4().hex[:16]}"
                triggers[trigger] = time.time()
                payload["trigger_id"] = trigger
            envelope = {"envelope_id": str(uuid.uuid4()), "type": "interactive",
                        "accepts_response_payload": payload.get("type") == "view_submission",
                        "retry_attempt": 0, "retry_reason": "", "payload": payload}
            ack = asyncio.run_coroutine_threadsafe(send_envelope(envelope), loop).result(5)
            ok = ack is not None and ack.get("envelope_id") == envelope["envelope_id"]
            self.reply(200, {"ack": ack, "acknowledged": ok})
            return
        if self.path == "/test/disconnect":
            msg = {"type": "disconnect", "reason": "refresh_requested",
                   "debug_info": {"host": "applink-test"}}
            asyncio.run_coroutine_threadsafe(sockets[-1].send(json.dumps(msg)), loop).result(5)
            self.reply(200, {})
            return
        method = self.path.removeprefix("/api/")
        record = {"method": method}
        try:
            params = json.loads(body or b"{}")
            record["params"] = params
            with lock:
                result = check(method, self.headers.get("Authorization", ""),
                               self.headers.get("Content-Type", ""), params)
            out = {"ok": True, **result}
        except Refused as e:
            record["error"] = str(e)
            out = {"ok": False, "error": str(e).split(":")[0]}
        except ValueError as e:
            record["error"] = f"invalid_json: {e}"
            out = {"ok": False, "error": "invalid_json"}
        with lock:
            calls.append(record)
        self.reply(200, out)


async def socket(ws):
    path = ws.request.path
    ticket = path.split("ticket=")[-1].split("&")[0] if "ticket=" in path else ""
    if ticket not in tickets:
        await ws.close(1008, "invalid ticket")
        return
    tickets.discard(ticket)
    sockets.append(ws)
    await ws.send(json.dumps({"type": "hello", "num_connections": 1,
                              "debug_info": {"host": "applink-test", "build_number": 1,
                                             "approximate_connection_time": 18060},
                              "connection_info": {"app_id": "A1"}}))
    try:
        async for raw in ws:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            fut = acks.pop(msg.get("envelope_id"), None)
            if fut is not None and not fut.done():
                fut.set_result(msg)
    except websockets.ConnectionClosed:
        # The app went away (the listener stopped): as Slack, wait for the next.
        pass


async def main():
    global loop, ws_port
    loop = asyncio.get_running_loop()
    async with websockets.serve(socket, "127.0.0.1", 0, ssl=TLS) as server:
        ws_port = server.sockets[0].getsockname()[1]
        http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if TLS:
            http.socket = TLS.wrap_socket(http.socket, server_side=True)
        threading.Thread(target=http.serve_forever, daemon=True).start()
        # The test's own calls (/test/…) in plain http beside it.
        control = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=control.serve_forever, daemon=True).start()
        print(json.dumps({"port": http.server_address[1], "control": control.server_address[1]}),
              flush=True)
        await asyncio.Future()


asyncio.run(main())
