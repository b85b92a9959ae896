"""One chat request of the LLM teacher: the OpenAI-compatible API through the `openai` SDK, with
every exchange saved under iter_N/llm_teacher/ and reused, so a resumed run never pays twice.

Network: the SDK's timeout per request and its retries (exponential backoff from 0.5 s to 8 s
with jitter, honouring Retry-After) on connection errors, timeouts, 408/409/429 and 5xx. When
they are spent the API is "unreachable": TeacherUnreachable (exit 75, retry later), raised
before anything of the attempt is written. Another refusal (401, 404, 400: a wrong key, model
or request) will not pass by waiting: TeacherError (exit 1) with the status and the fix.

The key: read from the environment variable the user names, handed to the SDK, which sends it
as a header. It is in no saved request (those hold the body only), and every message built
from an API error is scrubbed of it (servers echo keys back, e.g. "Incorrect API key sk-...").
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import TeacherError, TeacherUnreachable, UsageError
from ..rundir import atomic_write_json, read_json_object

TRANSCRIPT_DIR = "llm_teacher"  # under iter_N/: NN-<digest>.json, one exchange each
OPENAI_URL = "https://api.openai.com/v1"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_TIMEOUT_S = 600.0  # per request: a long reply from a slow local model takes minutes
DEFAULT_RETRIES = 5  # the SDK's, on connection errors, timeouts, 429 and 5xx: ~30 s of backoff in all
# The opening request's characters, instructions included (prompt.py fits the inputs to it): 60k characters
# are ~15k tokens of this text (~3.9 characters a token, measured in issue 34), which leaves a 32k-context
# local model ~17k tokens for its reply.
DEFAULT_INPUT_CHARS = 60_000


@dataclass(frozen=True)
class ApiSettings:
    model: str
    base_url: str = OPENAI_URL
    api_key_env: str = DEFAULT_KEY_ENV
    timeout_s: float = DEFAULT_TIMEOUT_S
    retries: int = DEFAULT_RETRIES
    max_tokens: int | None = None  # per iteration, prompt + completion, over every request of it
    max_reply_tokens: int | None = None  # per request, completion only (max_completion_tokens); None: the server's
    input_chars: int = DEFAULT_INPUT_CHARS  # the opening request's characters, instructions included

    def key(self) -> str:
        """The API key from the named variable. A local server (vLLM, SGLang, `transformers serve`)
        takes any key, so only the hosted default needs one; elsewhere a missing key sends 'unused'."""
        key = os.environ.get(self.api_key_env, "").strip()
        if key:
            return key
        if self.base_url.rstrip("/") == OPENAI_URL:
            raise UsageError(f"--teacher llm:{self.model}: ${self.api_key_env} is empty or not set; export your API key "
                             "in it, or name the variable that holds it with --teacher-api-key-env")
        return "unused"


def scrub(text: str, key: str) -> str:
    """`text` without the key (also its first half, which masked echoes keep), on one line."""
    line = " ".join(str(text).split())
    for secret in {key, key[: len(key) // 2]} - {"", "unused"}:
        if len(secret) >= 8:
            line = line.replace(secret, "<key>")
    return line[:300]


def request_digest(body: dict[str, Any]) -> str:
    """What identifies a request for replay: the model and the messages (a changed reply-token
    cap on a resumed run still finds the saved reply)."""
    asked = {"model": body["model"], "messages": body["messages"]}
    return hashlib.sha256(json.dumps(asked, sort_keys=True, ensure_ascii=False).encode()).hexdigest()[:16]


class Transcripts:
    """iter_N/llm_teacher/: every exchange as {request, reply, usage, status}, in order.

    status: "pending" (reply saved, files not written yet: a crash there replays it),
    "written" (its files are in iter_N/), "failed" (they failed a gate or the generator),
    "unusable" (it lacked a required part). Failed and unusable exchanges are never replayed:
    the same question then is asked again, instead of meeting the same bad reply."""

    def __init__(self, iter_dir: Path):
        self.dir = Path(iter_dir) / TRANSCRIPT_DIR

    def paths(self) -> list[Path]:
        return sorted(self.dir.glob("[0-9][0-9]-*.json")) if self.dir.is_dir() else []

    def all(self) -> list[dict[str, Any]]:
        return [e for e in (read_json_object(p) for p in self.paths()) if e is not None]

    def find(self, digest: str) -> dict[str, Any] | None:
        """The saved exchange answering the request with this digest, unless its reply failed or was unusable."""
        hits = [e for p in self.paths() if p.stem.endswith(f"-{digest}") and (e := read_json_object(p)) is not None]
        return hits[-1] if hits and hits[-1].get("status") not in ("failed", "unusable") else None

    def tokens_used(self) -> int:
        return sum(int((e.get("usage") or {}).get("total_tokens") or 0) for e in self.all())

    def save(self, exchange: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        atomic_write_json(self.dir / f"{len(self.paths()) + 1:02d}-{exchange['digest']}.json", exchange)

    def mark(self, digest: str, status: str) -> None:
        """Set the status of the newest exchange with this digest (older ones, unusable, stay so)."""
        hits = [path for path in self.paths() if path.stem.endswith(f"-{digest}")]
        if hits and (exchange := read_json_object(hits[-1])) is not None:
            atomic_write_json(hits[-1], {**exchange, "status": status})


def chat(settings: ApiSettings, messages: list[dict[str, str]], transcripts: Transcripts) -> dict[str, Any]:
    """The exchange answering `messages`: the saved one when this exact request was made before
    (free), else a new request, saved before it is returned."""
    body: dict[str, Any] = {"model": settings.model, "messages": messages}
    if settings.max_reply_tokens is not None:
        body["max_completion_tokens"] = settings.max_reply_tokens  # OpenAI's name; vLLM, SGLang, transformers read it
    digest = request_digest(body)
    if (saved := transcripts.find(digest)) is not None:
        return saved
    used = transcripts.tokens_used()
    if settings.max_tokens is not None and used >= settings.max_tokens:
        raise TeacherError(f"{transcripts.dir.parent}: the LLM teacher used {used} tokens of this iteration's "
                           f"--teacher-max-tokens {settings.max_tokens}; raise the cap and re-run to go on "
                           f"(transcripts in {transcripts.dir})")
    key = settings.key()
    started = time.time()
    reply, finish_reason, usage = _send(settings, body, key)
    exchange = {"digest": digest, "request": body, "reply": reply, "finish_reason": finish_reason, "usage": usage,
                "status": "pending", "base_url": settings.base_url, "seconds": round(time.time() - started, 1)}
    transcripts.save(exchange)
    return exchange


def _send(settings: ApiSettings, body: dict[str, Any], key: str) -> tuple[str, str | None, dict[str, int]]:
    """(reply text, finish_reason, token usage) of one chat completion."""
    try:
        import openai
    except ImportError:
        raise UsageError("--teacher llm:MODEL needs the openai SDK: pip install 'selfimprove[llm]'") from None
    client = openai.OpenAI(base_url=settings.base_url, api_key=key, timeout=settings.timeout_s,
                           max_retries=settings.retries)
    where = f"--teacher llm:{settings.model} at {settings.base_url}"
    try:
        response = client.chat.completions.create(**body)
    except (openai.APIConnectionError, openai.RateLimitError, openai.InternalServerError) as e:
        # APIConnectionError includes APITimeoutError; InternalServerError is any 5xx
        raise TeacherUnreachable(f"{where}: unreachable after {settings.retries} retries ({type(e).__name__}: "
                                 f"{scrub(str(e), key)}); nothing of this attempt was written: re-run the same "
                                 "command later") from None
    except openai.APIStatusError as e:
        raise TeacherError(f"{where}: refused with HTTP {e.status_code} ({scrub(str(e), key)}); check the model "
                           "name, --teacher-base-url and the key's variable (--teacher-api-key-env)") from None
    except openai.OpenAIError as e:  # e.g. a reply that is not a chat completion
        raise TeacherError(f"{where}: {type(e).__name__}: {scrub(str(e), key)}") from None
    except ValueError as e:
        # a body that is not JSON under a JSON content type (a proxy's HTML error page): the SDK lets the
        # decoder's error out, which read as "the teacher's write() raised JSONDecodeError; fix the teacher"
        raise TeacherError(f"{where}: the reply is not JSON ({type(e).__name__}: {scrub(str(e), key)[:200]}); is "
                           f"{settings.base_url} a chat-completions API (OpenAI-compatible, ending in /v1), and not a "
                           "proxy's error page? Check --teacher-base-url, then re-run") from None
    choices = getattr(response, "choices", None) or []
    content = choices[0].message.content if choices and choices[0].message else None
    if not isinstance(content, str):
        raise TeacherError(f"{where}: the reply has no message content; is {settings.base_url} a chat-completions "
                           "API (OpenAI-compatible, ending in /v1)?")
    usage = getattr(response, "usage", None)
    counts = {name: int(getattr(usage, name, 0) or 0) for name in ("prompt_tokens", "completion_tokens", "total_tokens")}
    return content, getattr(choices[0], "finish_reason", None), counts
