"""A scripted stand-in for the Anthropic Messages API, for running the real Claude Code
offline in tests (ANTHROPIC_BASE_URL=http://127.0.0.1:PORT).

The "model" reads the task typed into Claude Code. A task carries its script as JSON
in its instruction, `[script: {...}]`:

  write        {path: text}  files to create with the Write tool (relative to the
                workspace), all in the first turn
  deliverables [path]        what the summary lists under Key Deliverables
  summary      bool          whether to write summaries/<task_id>.md (default true)
  status       text          the summary's Status line (default "✅ COMPLETED")
  sleep        seconds       hold the reply after the first step this long (an agent
                             at work), or the only reply when there are no steps
  bash         command       run this with the Bash tool first (hitl's hook may ask)
  refuse_key   bool          answer 401 (authentication_error), as for a revoked key

Every request is logged as one JSON line to the file named by argv[2], if given.
Prints "listening PORT" once it serves.
"""

import json
import re
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SCRIPTS = {}
LOCK = threading.RLock()
LOG = open(sys.argv[2], "a") if len(sys.argv) > 2 else None


def texts(content):
    if isinstance(content, str):
        return [content]
    return [b.get("text", "") for b in content or [] if b.get("type") == "text"]


def turn(body):
    """The task of the latest typed prompt, and the ids of every tool result so far.
    (Claude Code merges turns and moves a new prompt after the last tool results, so
    the stand-in counts its own tool calls by id, not by position.)"""
    task, results = None, set()
    for m in body.get("messages", []):
        content = m.get("content")
        if m.get("role") != "user":
            continue
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
        for b in blocks:
            if b.get("type") == "tool_result":
                results.add(b.get("tool_use_id"))
            elif b.get("type") == "text":
                found = re.findall(r"Task (task-[A-Za-z0-9_-]+):", b.get("text", ""))
                if found:
                    task = found[-1]
                    script = re.search(r"\[script: (\{.*?\})\]", b["text"], re.S)
                    if script:
                        with LOCK:
                            SCRIPTS.setdefault(task, json.loads(script.group(1)))
    return task, results


# The tool call ids the stand-in made for each task's steps: a step is done once
# Claude Code has sent a result for each of its calls.
EMITTED = {}


def workspace(body):
    everything = json.dumps(body)
    m = re.search(r"Primary working directory: ([^\\\s]+)", everything)
    return m.group(1) if m else "."


def plan(body):
    """The reply's content blocks and stop reason."""
    if "Primary working directory" not in json.dumps(body):
        # A side request of Claude Code's (no system prompt of the agent's own).
        return [{"type": "text", "text": "ok"}], "end_turn"
    task, results = turn(body)
    if task is None:
        return [{"type": "text", "text": "Ready."}], "end_turn"
    with LOCK:
        script = SCRIPTS.get(task, {})
    ws = workspace(body)
    steps = []
    if script.get("bash"):
        steps.append([tool("Bash", {"command": script["bash"], "description": "run it"})])
    writes = [tool("Write", {"file_path": f"{ws}/{p}", "content": text})
              for p, text in script.get("write", {}).items()]
    if writes:
        steps.append(writes)
    if script.get("summary", True):
        listed = "\n".join(f"- `{p}` - made for {task}" for p in script.get("deliverables", []))
        summary = (f"# Task Completion Summary\n\n## Objective\nTask {task}\n\n"
                   f"## Accomplishments\n- Did what was asked\n\n"
                   f"## Key Deliverables\n{listed}\n\n## Test Results\n✅ All 3 tests passed\n\n"
                   f"## Important Notes\n- Written by the stand-in\n\n"
                   f"## Status\n{script.get('status', '✅ COMPLETED')}\n")
        steps.append([tool("Write", {"file_path": f"{ws}/summaries/{task}.md", "content": summary})])
    # Each step is one assistant turn; the first whose calls have no results yet is
    # (re)made.
    with LOCK:
        emitted = EMITTED.setdefault(task, {})
        napped = emitted.setdefault("napped", set())
        done = [i for i, _ in enumerate(steps) if emitted.get(i) and emitted[i] <= results]
        nap = 0.0
        if script.get("sleep") and len(done) == min(1, len(steps)) and "nap" not in napped:
            napped.add("nap")
            nap = float(script["sleep"])
        for i, step in enumerate(steps):
            if i in done:
                continue
            emitted[i] = {b["id"] for b in step}
            break
        else:
            step = None
    time.sleep(nap)
    if step is not None:
        return step, "tool_use"
    return [{"type": "text", "text": f"Finished {task}."}], "end_turn"


def tool(name, args):
    tool.n += 1
    return {"type": "tool_use", "id": f"toolu_{tool.n:06d}", "name": name, "input": args}


tool.n = 0


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def reply(self, status, body, ctype="application/json"):
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self.reply(404, b'{"type":"error","error":{"type":"not_found_error","message":"no"}}')

    def do_POST(self):
        n = int(self.headers.get("content-length", 0))
        body = json.loads(self.rfile.read(n) or b"{}")
        if "count_tokens" in self.path:
            return self.reply(200, b'{"input_tokens": 10}')
        task, _ = turn(body)
        with LOCK:
            refused = SCRIPTS.get(task, {}).get("refuse_key")
        if refused and "Primary working directory" in json.dumps(body):
            return self.reply(401, b'{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}')
        blocks, stop = plan(body)
        if LOG:
            with LOCK:
                shape = [(m.get("role"), [b.get("type") for b in m["content"]] if isinstance(m.get("content"), list) else "text")
                         for m in body.get("messages", [])]
                said = [t for m in body.get("messages", []) if m.get("role") == "user"
                        for t in texts(m.get("content"))]
                LOG.write(json.dumps({"path": self.path, "stream": body.get("stream"), "turn": [turn(body)[0], len(turn(body)[1])],
                                      "last_said": said[-1][:200] if said else "",
                                      "messages": shape, "reply": blocks, "stop": stop}) + "\n")
                LOG.flush()
        message = {"id": "msg_standin", "type": "message", "role": "assistant",
                   "model": body.get("model", "claude"), "content": [], "stop_reason": None,
                   "stop_sequence": None, "usage": {"input_tokens": 10, "output_tokens": 5}}
        if not body.get("stream"):
            message.update(content=blocks, stop_reason=stop)
            return self.reply(200, json.dumps(message).encode())
        events = [("message_start", {"type": "message_start", "message": message})]
        for i, b in enumerate(blocks):
            if b["type"] == "text":
                start = {"type": "text", "text": ""}
                delta = {"type": "text_delta", "text": b["text"]}
            else:
                start = {"type": "tool_use", "id": b["id"], "name": b["name"], "input": {}}
                delta = {"type": "input_json_delta", "partial_json": json.dumps(b["input"])}
            events += [("content_block_start", {"type": "content_block_start", "index": i, "content_block": start}),
                       ("content_block_delta", {"type": "content_block_delta", "index": i, "delta": delta}),
                       ("content_block_stop", {"type": "content_block_stop", "index": i})]
        events += [("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
                                      "usage": {"output_tokens": 5}}),
                   ("message_stop", {"type": "message_stop"})]
        data = b"".join(f"event: {e}\ndata: {json.dumps(d)}\n\n".encode() for e, d in events)
        try:
            self.reply(200, data, "text/event-stream")
        except (BrokenPipeError, ConnectionResetError):
            pass  # Claude Code hung up (interrupted).


server = ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1]) if len(sys.argv) > 1 else 0), Handler)
server.daemon_threads = True
print(f"listening {server.server_address[1]}", flush=True)
server.serve_forever()
