"""A stand-in for Telegram's Bot API server, for tests/it/telegram.rs.

Written from the Bot API's documentation (https://core.telegram.org/bots/api): the
four methods hitl's bot calls, each taking a JSON body, checked field by field
against the documented parameters and their types (an unknown parameter, a wrong
type, a text over 4096 characters or HTML Telegram would not parse, callback data
over 64 bytes is answered 400 as the real server answers, and recorded as a
violation). The test drives it through /test/...: it adds updates (a press, a
reply) for getUpdates to hand out, and reads every call made.

    python3 telegram_api.py TOKEN   # prints {"port": N}, then serves until stdin closes
"""

import json
import sys
import threading
import time
from html.parser import HTMLParser
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TOKEN = sys.argv[1]
lock = threading.Condition()
updates = []  # every update made, in order
calls = []  # every call: {"method", "params", "error"}
messages = {}  # message_id -> message
callback_ids = set()
next_update = [1000]
next_message = [1]

# https://core.telegram.org/bots/api#formatting-options: the tags HTML mode takes.
HTML_TAGS = {"b", "strong", "i", "em", "u", "ins", "s", "strike", "del", "span",
             "tg-spoiler", "a", "tg-emoji", "code", "pre", "blockquote"}


class TelegramHtml(HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.open, self.text = [], []

    def handle_starttag(self, tag, attrs):
        if tag not in HTML_TAGS:
            raise ValueError(f"Unsupported start tag \"{tag}\"")
        self.open.append(tag)

    def handle_endtag(self, tag):
        if not self.open or self.open.pop() != tag:
            raise ValueError(f"Unmatched end tag \"{tag}\"")

    def handle_data(self, data):
        self.text.append(data)


def entities_text(text, parse_mode):
    """The text as shown: HTML parsed as Telegram parses it."""
    if parse_mode is None:
        return text
    if parse_mode != "HTML":
        raise ValueError(f"unsupported parse_mode {parse_mode!r} in this stand-in")
    # Telegram's HTML: only &lt; &gt; &amp; &quot; and numeric entities; a bare < is an error.
    p = TelegramHtml()
    p.feed(text)
    p.close()
    if p.open:
        raise ValueError(f"Can't find end tag corresponding to start tag \"{p.open[-1]}\"")
    return "".join(p.text)


def check(params, spec):
    """Checks params against {name: (type or tuple of types, required)}."""
    for name in params:
        if name not in spec:
            raise ValueError(f"unknown parameter {name!r}")
    for name, (types, required) in spec.items():
        if name not in params:
            if required:
                raise ValueError(f"parameter {name!r} is required")
            continue
        value = params[name]
        if types is int and isinstance(value, bool):
            raise ValueError(f"{name} must be an Integer")
        if not isinstance(value, types):
            raise ValueError(f"{name} has the wrong type: {type(value).__name__}")


def check_keyboard(markup):
    """InlineKeyboardMarkup: inline_keyboard, an Array of Array of InlineKeyboardButton."""
    check(markup, {"inline_keyboard": (list, True)})
    for row in markup["inline_keyboard"]:
        if not isinstance(row, list):
            raise ValueError("inline_keyboard must be an Array of Array of InlineKeyboardButton")
        for button in row:
            check(button, {"text": (str, True), "callback_data": (str, False), "url": (str, False)})
            if "callback_data" in button:
                size = len(button["callback_data"].encode())
                if not 1 <= size <= 64:
                    raise ValueError("BUTTON_DATA_INVALID")
            if ("callback_data" in button) == ("url" in button):
                raise ValueError("a button needs exactly one of callback_data and url")


def send_message(params):
    check(params, {
        "chat_id": ((int, str), True), "text": (str, True), "parse_mode": (str, False),
        "link_preview_options": (dict, False), "reply_markup": (dict, False),
        "disable_notification": (bool, False), "reply_parameters": (dict, False),
    })
    shown = entities_text(params["text"], params.get("parse_mode"))
    if not 1 <= len(shown) <= 4096:
        raise ValueError("message text is empty or too long")
    if "link_preview_options" in params:
        check(params["link_preview_options"], {"is_disabled": (bool, False)})
    if "reply_markup" in params:
        check_keyboard(params["reply_markup"])
    with lock:
        mid = next_message[0]
        next_message[0] += 1
        m = {"message_id": mid, "date": int(time.time()),
             "chat": {"id": params["chat_id"], "type": "private"},
             "from": {"id": 1, "is_bot": True, "first_name": "hitl"},
             "text": shown}
        if "reply_markup" in params:
            m["reply_markup"] = params["reply_markup"]
        messages[mid] = m
    return m


def edit_message_text(params):
    check(params, {
        "chat_id": ((int, str), False), "message_id": (int, False),
        "inline_message_id": (str, False), "text": (str, True), "parse_mode": (str, False),
        "link_preview_options": (dict, False), "reply_markup": (dict, False),
    })
    if "inline_message_id" not in params and not ("chat_id" in params and "message_id" in params):
        raise ValueError("chat_id and message_id, or inline_message_id, are required")
    shown = entities_text(params["text"], params.get("parse_mode"))
    if not 1 <= len(shown) <= 4096:
        raise ValueError("message text is empty or too long")
    with lock:
        m = messages.get(params["message_id"])
        if m is None:
            raise ValueError("message to edit not found")
        m["text"] = shown
        m.pop("reply_markup", None)
        if "reply_markup" in params:
            check_keyboard(params["reply_markup"])
            m["reply_markup"] = params["reply_markup"]
        return m


def answer_callback_query(params):
    check(params, {
        "callback_query_id": (str, True), "text": (str, False), "show_alert": (bool, False),
        "url": (str, False), "cache_time": (int, False),
    })
    if params["callback_query_id"] not in callback_ids:
        raise ValueError("query is too old and response timeout expired or query ID is invalid")
    if len(params.get("text", "")) > 200:
        raise ValueError("text is longer than 200 characters")
    return True


def get_updates(params):
    check(params, {
        "offset": (int, False), "limit": (int, False), "timeout": (int, False),
        "allowed_updates": (list, False),
    })
    offset = params.get("offset", 0)
    deadline = time.time() + min(params.get("timeout", 0), 50)
    with lock:
        while True:
            ready = [u for u in updates if u["update_id"] >= offset]
            if ready or time.time() >= deadline:
                return ready[: params.get("limit", 100)]
            lock.wait(timeout=max(0.0, deadline - time.time()))


METHODS = {
    "sendMessage": send_message,
    "editMessageText": edit_message_text,
    "answerCallbackQuery": answer_callback_query,
    "getUpdates": get_updates,
}


class Api(BaseHTTPRequestHandler):
    def reply(self, status, body):
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        if self.path == "/test/calls":
            with lock:
                return self.reply(200, calls)
        self.reply(404, {})

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        if self.path == "/test/update":
            update = json.loads(raw)
            with lock:
                update["update_id"] = next_update[0]
                next_update[0] += 1
                if "callback_query" in update:
                    callback_ids.add(update["callback_query"]["id"])
                updates.append(update)
                lock.notify_all()
            return self.reply(200, update)
        if not self.path.startswith(f"/bot{TOKEN}/"):
            return self.reply(401, {"ok": False, "error_code": 401, "description": "Unauthorized"})
        method = self.path[len(f"/bot{TOKEN}/"):]
        if method not in METHODS:
            return self.reply(404, {"ok": False, "error_code": 404, "description": "Not Found"})
        if self.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return self.reply(400, {"ok": False, "error_code": 400, "description": "Bad Request: no JSON body"})
        params = json.loads(raw or b"{}")
        record = {"method": method, "params": params}
        try:
            result = METHODS[method](params)
            status, body = 200, {"ok": True, "result": result}
        except ValueError as e:
            record["error"] = str(e)
            status, body = 400, {"ok": False, "error_code": 400, "description": f"Bad Request: {e}"}
        if method != "getUpdates" or "error" in record:
            with lock:
                calls.append(record)
        self.reply(status, body)

    def log_message(self, *args):
        pass


server = ThreadingHTTPServer(("127.0.0.1", 0), Api)
print(json.dumps({"port": server.server_port}), flush=True)
threading.Thread(target=server.serve_forever, daemon=True).start()
sys.stdin.read()
