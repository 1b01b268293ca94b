"""A stand-in for the Gemini API as Gemini CLI calls it (`GOOGLE_GEMINI_BASE_URL`,
`GEMINI_API_KEY`), for tests/it/gemini.rs.

Each POST /v1beta/models/MODEL:streamGenerateContent?alt=sse is answered, as one
server-sent event, with the next step of the script given on the command line: a
JSON list whose items are {"exec": "COMMAND"} (a `functionCall` of Gemini CLI's
`run_shell_command` tool) or {"say": "TEXT"} (the model's text, which ends the
turn); `{summary}` in a command is the summary file (`summaries/ID.md`) the
request's text names. Requests must carry the key (`x-goog-api-key`, or `key=` in the query). GET /test/requests returns
every request's body, in order.

Usage: gemini_api.py KEY SCRIPT_JSON. Prints {"port": P} once it listens.
"""

import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

KEY, SCRIPT = sys.argv[1], json.loads(sys.argv[2])
requests = []
lock = threading.Lock()


def parts_for(n, body):
    step = SCRIPT[n] if n < len(SCRIPT) else {"say": "done"}
    if "exec" in step:
        # `{summary}`: the summary file a task's text names (seed 002's block).
        named = re.search(r"summaries/[A-Za-z0-9_.-]+?\.md", json.dumps(body))
        command = step["exec"].replace("{summary}", named.group(0) if named else "summary.md")
        return [{"functionCall": {"name": "run_shell_command",
                                  "args": {"command": command, "description": "a step"}}}]
    return [{"text": step["say"]}]


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
        keyed = self.headers.get("x-goog-api-key") == KEY or f"key={KEY}" in self.path
        if ":streamGenerateContent" not in self.path or not keyed:
            self.send_response(401)
            self.end_headers()
            return
        with lock:
            n = len(requests)
            requests.append(body)
        chunk = {"candidates": [{"content": {"role": "model", "parts": parts_for(n, body)},
                                 "finishReason": "STOP", "index": 0}],
                 "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1,
                                   "totalTokenCount": 2}}
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.end_headers()
        self.wfile.write(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
        self.wfile.flush()


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_port}), flush=True)
server.serve_forever()
