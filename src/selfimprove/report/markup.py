"""The report page's one rendering path: no value reaches the HTML unescaped, whatever its type.

A run dir is untrusted input (issue 41): a teacher, a generator or whoever mailed the dir can
put any string, or a string where a number belongs, into the files the page reads. So the page
never builds markup with f-strings. Its templates are constant strings given to `html()`, and
every value filled into them (a label, a count from weakness_stats.json, a float) is formatted
with its spec, then capped, cleaned of bidi and control characters, and escaped. Only markup
that `html()` or `join()` built (an `Html`) goes in as it is, so an unescaped value would need
an explicit `Html(...)` around it, which only this module writes.

A value that does not fit its spec (`"<img>"` for `{:.3f}`) is shown as its escaped text
rather than raising: the page is still written, and the reader sees the odd value.
"""

from __future__ import annotations

import re
import string
from html import escape
from typing import Any, Iterable

MAX_CHARS = 2_000  # a 10 MB label made a 100 MB page in 23 s: one value shows at most this much
# Bidi overrides and isolates (U+202E turns "gpj.exe" around) and marks: shown as their code point.
_BIDI = re.compile("[\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")
# C0 except tab and newline, DEL and C1: never meaningful on a page, and the page is also read as text.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


class Html(str):
    """Markup this module built (escaped values in a constant template): the one kind of str that
    `html()` and `join()` insert as it is."""


def clean(value: Any, limit: int = MAX_CHARS) -> str:
    """`value` as page text: None is empty, longer than `limit` is cut with a note of how much,
    bidi controls show as `<U+202E>` and other control characters as `?`."""
    s = "" if value is None else str(value)
    if len(s) > limit:
        s = f"{s[:limit]}... [{len(s) - limit:,} more characters not shown]"
    s = _BIDI.sub(lambda m: f"<U+{ord(m.group()):04X}>", s)
    return _CONTROL.sub("?", s)


def esc(value: Any) -> Html:
    """`value` escaped for the page (an `Html` as it is)."""
    return value if isinstance(value, Html) else Html(escape(clean(value)))


def esc_long(value: Any, limit: int = 20_000) -> Html:
    """`value` escaped like `esc`, with a larger cap: a whole file shown on purpose (a weakness report,
    a gate report, a completion), still bounded so a forged 10 MB file cannot make a 10 MB page."""
    return Html(escape(clean(value, limit)))


def fmt(value: Any, spec: str) -> str:
    """`format(value, spec)`, or the value as text when it does not fit the spec (a forged
    `"<img ...>"` where a number belongs is shown, escaped later, rather than raising)."""
    try:
        return format(value, spec)
    except (TypeError, ValueError):
        return str(value)


class _Formatter(string.Formatter):
    def format_field(self, value: Any, format_spec: str) -> str:
        if isinstance(value, Html) and not format_spec:
            return value
        return escape(clean(fmt(value, format_spec)))


_FORMATTER = _Formatter()


def html(template: str, *args: Any, **kwargs: Any) -> Html:
    """`template` (a constant in the code, `str.format` syntax) with every field formatted and escaped."""
    return Html(_FORMATTER.vformat(template, args, kwargs))


def join(parts: Iterable[Any], sep: str = "") -> Html:
    """The parts concatenated; a part that is not `Html` is escaped like any value."""
    return Html(escape(sep).join(esc(p) for p in parts))
