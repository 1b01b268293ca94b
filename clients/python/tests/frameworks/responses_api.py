"""A stand-in for the OpenAI Responses API (non-streamed), as the Agents SDK calls
it: the first request of each run is answered with a call of the `deploy` tool, every
later one with a message. Records each request's body; GET /requests returns them.
Prints {"port": P} once it listens."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

requests = []
lock = threading.Lock()


def item(body):
    inputs = body.get("input") or []
    answered = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in inputs)
    if not answered:
        return {"id": "fc_1", "type": "function_call", "call_id": "call_deploy", "name": "deploy",
                "arguments": json.dumps({"version": "1.4"}), "status": "completed"}
    return {"id": "msg_1", "type": "message", "role": "assistant", "status": "completed",
            "content": [{"type": "output_text", "text": "done", "annotations": []}]}


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def reply(self, body):
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with lock:
            self.reply(requests)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
        with lock:
            requests.append(body)
        out = item(body)
        self.reply({
            "id": f"resp_{len(requests)}", "object": "response", "created_at": 0,
            "status": "completed", "model": body.get("model", "gpt-test"), "output": [out],
            "parallel_tool_calls": True, "tool_choice": "auto", "tools": [],
            "usage": {"input_tokens": 1, "output_tokens": 1, "total_tokens": 2,
                      "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens_details": {"reasoning_tokens": 0}},
        })


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_port}), flush=True)
server.serve_forever()
