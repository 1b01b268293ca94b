"""A LangGraph graph that interrupts twice (a name, then an approval), answered in
hitl. Usage: langgraph_run.py CHECKPOINT_DB start|resume PROJECT. Prints the final
state as JSON."""

import json
import sys
from typing import TypedDict
from langgraph.graph import StateGraph, START, END
from langgraph.types import interrupt
from langgraph.checkpoint.sqlite import SqliteSaver
from hitl_client import Client
from hitl_client.langgraph import run_with_hitl

class S(TypedDict, total=False):
    release: str
    deployed: bool

def name(s: S) -> S:
    return {"release": interrupt("Name the release?")}

def deploy(s: S) -> S:
    return {"deployed": interrupt({"question": f"Deploy {s['release']}?", "type": "approval"})}

b = StateGraph(S)
b.add_node("name", name)
b.add_node("deploy", deploy)
b.add_edge(START, "name")
b.add_edge("name", "deploy")
b.add_edge("deploy", END)
with SqliteSaver.from_conn_string(sys.argv[1]) as saver:
    g = b.compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "t1"}}
    start = {} if sys.argv[2] == "start" else None
    out = run_with_hitl(g, cfg, start, client=Client(project=sys.argv[3]))
    print(json.dumps(out))
