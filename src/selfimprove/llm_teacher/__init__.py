"""The built-in teacher behind an LLM API: `selfimprove run --teacher llm:MODEL`.

    prompt.py  SKILL.md's teacher sections + the iteration's TRAIN inputs -> chat messages
    api.py     one request through the openai SDK; transcripts under iter_N/llm_teacher/
    reply.py   the tagged reply -> weakness_report.md, gen_dataset.py, scratchpad sections

It does the agent's job with the agent's text: `write(ctx)` asks for the files, and when the
tool calls it again with `ctx.feedback` (a gate or the generator failed), it sends the report
back in the same conversation. The cap per iteration is every teacher's (teacher.py
MAX_TEACHER_ATTEMPTS): the run loop's on failed gates, and here on replies that cannot be used.
"""

from __future__ import annotations

from ..errors import TeacherError
from ..rundir import RunDir
from ..teacher import MAX_TEACHER_ATTEMPTS, TeacherContext
from .api import ApiSettings, Transcripts, chat
from .prompt import REPLY_FORMAT, feedback_message, inputs_message, teacher_instructions
from .reply import parse_reply, write_reply

SPEC_PREFIX = "llm:"  # --teacher llm:MODEL


class LlmTeacher:
    def __init__(self, settings: ApiSettings):
        self.settings = settings

    def write(self, ctx: TeacherContext) -> None:
        transcripts = Transcripts(ctx.iter_dir)
        messages = self._conversation(ctx, transcripts)
        for _ in range(MAX_TEACHER_ATTEMPTS):
            exchange = chat(self.settings, messages, transcripts)
            _record_tokens(ctx, transcripts)
            reply, problems = parse_reply(exchange["reply"], ctx.iteration)
            if problems and exchange.get("finish_reason") == "length":
                problems.insert(0, f"your reply was cut at the token limit ({self._reply_limit()}); be shorter")
            if not problems:
                write_reply(ctx, reply)
                transcripts.mark(exchange["digest"], "written")
                return
            transcripts.mark(exchange["digest"], "unusable")
            messages = [*messages[:2], {"role": "assistant", "content": _clipped(exchange["reply"])},
                        {"role": "user", "content": "Your reply cannot be used: " + "; ".join(problems)
                         + ". Reply again with every file and section, in the format asked."}]
        raise TeacherError(f"{ctx.iter_dir}: the LLM teacher's replies lacked what the tool needs "
                           f"{MAX_TEACHER_ATTEMPTS} times (last: {problems[0]}); transcripts in {transcripts.dir}. "
                           "Re-run to ask again, or use a stronger model")

    def _reply_limit(self) -> str:
        limit = self.settings.max_reply_tokens
        return f"--teacher-max-reply-tokens {limit}" if limit else "the server's max tokens"

    def _conversation(self, ctx: TeacherContext, transcripts: Transcripts) -> list[dict[str, str]]:
        """The messages of this call. A first write starts the conversation; a fix is the opening,
        the newest usable reply and the failure report, unless that reply was never written (a
        crash between saving and writing): then its exchange is replayed as it is, for free.

        Earlier rounds are dropped: the newest reply holds every file in full, so a request never
        grows past the opening, one reply and one report (a local model's 32k context holds it,
        and a hosted model is not paid again for superseded files)."""
        exchanges = transcripts.all()
        usable = [e for e in exchanges if e.get("status") != "unusable"]
        # The iteration's opening messages are built once: later the skeletons and the scratchpad
        # hold the teacher's own text, and a rebuilt opening would miss the saved replies.
        start = exchanges[0]["request"]["messages"][:2] if exchanges else self._opening(ctx)
        newest = usable[-1] if usable else None  # the conversation goes on from its last usable reply
        if ctx.feedback is None or newest is None:
            return start if ctx.feedback is None else [*start, {"role": "user", "content": feedback_message(ctx.feedback)}]
        if newest.get("status") == "pending":
            return newest["request"]["messages"]
        # Its files failed: never replay it, or a model that sends the same files twice would
        # have its old reply replayed for free, again and again, until the cap.
        transcripts.mark(newest["digest"], "failed")
        return [*start, {"role": "assistant", "content": newest["reply"]},
                {"role": "user", "content": feedback_message(ctx.feedback)}]

    def _opening(self, ctx: TeacherContext) -> list[dict[str, str]]:
        """The system message (the skill's teacher sections) and the inputs, together within
        --teacher-input-chars: the inputs get what the instructions leave."""
        system = f"{REPLY_FORMAT}\n\n{teacher_instructions()}"
        return [{"role": "system", "content": system},
                {"role": "user", "content": inputs_message(ctx, max(0, self.settings.input_chars - len(system)))}]


# An unusable reply goes back (so the model sees what it sent) at most this long: its head and tail
# around a count of what was cut. Whole, a 10 MB reply was re-sent on each of the re-asks and paid
# for each time; the model is asked for every file again anyway, so the middle is not needed.
REASK_REPLY_CHARS = 20_000


def _clipped(reply: str) -> str:
    if len(reply) <= REASK_REPLY_CHARS:
        return reply
    half = REASK_REPLY_CHARS // 2
    return f"{reply[:half]}\n[... {len(reply) - 2 * half} characters of this reply cut ...]\n{reply[-half:]}"


def _record_tokens(ctx: TeacherContext, transcripts: Transcripts) -> None:
    """run.json teacher_tokens["iter_N"]: what this iteration's requests cost so far."""
    rd = RunDir(ctx.run_dir)
    if not rd.run_json.is_file():
        return  # a context without a run dir (a teacher tried by hand)
    with rd.updating():
        cfg = rd.read_run()
        cfg.teacher_tokens = {**cfg.teacher_tokens, f"iter_{ctx.iteration}": transcripts.tokens_used()}
        rd.write_run(cfg)


__all__ = ["LlmTeacher", "ApiSettings", "SPEC_PREFIX"]
