"""A stand-in for the OpenAI Responses API as Codex CLI calls it through a custom
model provider (`wire_api = "responses"`), for tests/it/codex.rs.

Each POST /v1/responses is answered, as a server-sent event stream
(`response.created`, `response.output_item.added`, `.done`, `response.completed`),
with the next step of the script given on the command line: a JSON list whose
items are {"exec": "COMMAND"} (a `function_call` to Codex's `exec_command` tool; with
"escalate": "WHY", asking to run outside its sandbox),
{"patch": "*** Begin Patch…"} (a `custom_tool_call` of its `apply_patch` tool) or
{"say": "TEXT"} (the assistant's message, which ends the turn); `{summary}` in a
command is the summary file (`summaries/ID.md`) the request's text names. Requests must carry
the provider's key as a bearer token. GET /test/requests returns every request's
body, in order.

Usage: codex_api.py KEY SCRIPT_JSON WORKDIR. Prints {"port": P} once it listens.
"""

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEY, SCRIPT, WORKDIR = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
requests = []
lock = threading.Lock()


def item_for(n, body):
    step = SCRIPT[n] if n < len(SCRIPT) else {"say": "done"}
    if "exec" in step:
        # `{summary}`: the summary file a task's text names (seed 002's block).
        named = re.search(r"summaries/[A-Za-z0-9_.-]+?\.md", json.dumps(body))
        step = dict(step, exec=step["exec"].replace("{summary}", named.group(0) if named else "summary.md"))
        call = f"call_{n}"
        args = {"cmd": step["exec"], "workdir": WORKDIR, "yield_time_ms": 5000}
        if "escalate" in step:
            # Outside Codex's sandbox: what its approval policy asks the user about.
            args.update(sandbox_permissions="require_escalated", justification=step["escalate"])
        return {"id": f"fc_{n}", "type": "function_call", "call_id": call, "name": "exec_command",
                "arguments": json.dumps(args)}
    if "patch" in step:
        # Codex's file edits: its `apply_patch` tool, freeform (the patch as the
        # call's whole input), as it is offered to the models that take it.
        return {"id": f"ctc_{n}", "type": "custom_tool_call", "call_id": f"call_{n}",
                "name": "apply_patch", "input": step["patch"]}
    return {"id": f"msg_{n}", "type": "message", "role": "assistant",
            "content": [{"type": "output_text", "text": step["say"], "annotations": []}]}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def do_GET(self):
        if self.path == "/test/requests":
            with lock:
                data = json.dumps(requests).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        else:
            self.send_response(404)
            self.end_headers()

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        if self.path != "/v1/responses" or self.headers.get("Authorization") != f"Bearer {KEY}":
            self.send_response(401)
            self.end_headers()
            return
        with lock:
            n = len(requests)
            requests.append(body)
        item = item_for(n, body)
        events = [
            {"type": "response.created", "response": {"id": f"resp_{n}"}},
            {"type": "response.output_item.added", "output_index": 0, "item": item},
            {"type": "response.output_item.done", "output_index": 0, "item": item},
            {"type": "response.completed", "response": {
                "id": f"resp_{n}", "status": "completed", "output": [item],
                "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2}}},
        ]
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        for e in events:
            self.wfile.write(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode())
        self.wfile.flush()


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_port}), flush=True)
server.serve_forever()
