"""A small OpenAI-compatible chat server for the LLM teacher's tests: stdlib http.server in a
thread, replaying recorded replies (tests/fixtures/llm_teacher/) and logging every request.

`script` lists what the next requests get, in order: an int is an HTTP error status (with
`retry-after-ms: 1`, so the SDK's backoff stays fast), a str is a reply text; when the script
runs out, every further request gets `default` (a reply text, or a status).

Also the eval sentinels both LLM teacher test files seal a run dir with."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

FIXTURES = Path(__file__).parent / "fixtures" / "llm_teacher"
SENTINEL = "EVAL-SENTINEL"


def seal_eval_with_sentinels(run_root: Path) -> None:
    """Mark every eval rollout's prompt, completion and answer: any of it in a request or a file
    the teacher wrote would show the sentinel."""
    for path in run_root.rglob("eval_rollouts.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        for k, row in enumerate(rows):
            row["prompt"] = [{"role": "user", "content": f"{SENTINEL} prompt {k}"}]
            row["completion"] = [{"role": "assistant", "content": f"{SENTINEL} completion {k}"}]
            row["answer"] = f"{SENTINEL}-{k}"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def recorded(name: str = "good_reply.md") -> str:
    return (FIXTURES / name).read_text(encoding="utf-8")


class ReplayServer:
    def __init__(self, default: str | int, script: list[str | int] | None = None, headers_echo: bool = True):
        self.default, self.script, self.headers_echo = default, list(script or []), headers_echo
        self.requests: list[dict] = []  # {"path", "headers", "body" (raw text)}
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # keep pytest output clean
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0)).decode("utf-8")
                server.requests.append({"path": self.path, "headers": {k.lower(): v for k, v in self.headers.items()},
                                        "body": body})
                answer = server.script.pop(0) if server.script else server.default
                if isinstance(answer, int):
                    # like hosted APIs, echo the key back in the error (the teacher must scrub it)
                    echoed = server.headers_echo and self.headers.get("authorization", "")
                    message = f"replay status {answer}" + (f"; Incorrect API key provided: {echoed}" if echoed else "")
                    payload = json.dumps({"error": {"message": message, "type": "test"}}).encode()
                    self.send_response(answer)
                    self.send_header("retry-after-ms", "1")
                else:
                    model = json.loads(body).get("model", "replay")
                    payload = json.dumps({
                        "id": f"chatcmpl-{len(server.requests)}", "object": "chat.completion", "created": 0,
                        "model": model,
                        "choices": [{"index": 0, "finish_reason": "stop",
                                     "message": {"role": "assistant", "content": answer}}],
                        "usage": {"prompt_tokens": len(body) // 4, "completion_tokens": len(answer) // 4,
                                  "total_tokens": len(body) // 4 + len(answer) // 4},
                    }).encode()
                    self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> "ReplayServer":
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
