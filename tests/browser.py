"""Open a local HTML file in headless Chromium (Debian's `chromium`; `make test-deps` installs
it) and report what the browser saw: the DOM after load, console messages, the requests the page
made, and a screenshot.

Requests: Chromium is pointed at a proxy on 127.0.0.1 that records every request line and answers
none, so any fetch by the page (an image, a font, a CDN script, over http or https) is seen here
and nothing leaves the machine. Chromium makes some requests of its own (component updates,
account checks) even with background networking off; a blank page loaded the same way gives
those hosts (with the few known ones, BROWSER_HOSTS), and only the others count as the page's.
Console: with --enable-logging=stderr Chromium logs each console message as an `INFO:CONSOLE` line.
"""

from __future__ import annotations

import re
import shutil
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path

FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-features=NetworkTimeServiceQuerying,OptimizationHints,MediaRouter,Translate",
         "--no-pings", "--disable-domain-reliability", "--disable-breakpad", "--hide-scrollbars",
         "--enable-logging=stderr", "--v=0"]
CONSOLE = re.compile(r":CONSOLE[:(]")
# Hosts Chromium itself calls (account and component-update checks) whatever the page; the blank page's
# hosts are added at each visit, but these calls come at random moments, so a blank load may miss them.
BROWSER_HOSTS = {"accounts.google.com", "update.googleapis.com", "clients2.google.com", "clientservices.googleapis.com",
                 "redirector.gvt1.com", "safebrowsing.googleapis.com", "optimizationguide-pa.googleapis.com"}
BLANK = "<!DOCTYPE html><html><head><title>blank</title></head><body><p>blank</p></body></html>\n"


def chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


class _Proxy:
    """A TCP listener that records the first line of each request and closes the connection."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(32)
        self.port = self.sock.getsockname()[1]
        self.lines: list[str] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                conn.settimeout(2)
                try:
                    self.lines.append(conn.recv(4096).split(b"\r\n", 1)[0].decode("latin-1"))
                except OSError:
                    self.lines.append("(no request line)")

    def close(self) -> None:
        self.sock.close()


def host_of(request_line: str) -> str:
    """'GET http://h/x HTTP/1.1' or 'CONNECT h:443 HTTP/1.1' -> 'h'."""
    parts = request_line.split()
    target = parts[1] if len(parts) > 1 else request_line
    target = re.sub(r"^[a-z]+://", "", target)
    return target.split("/", 1)[0].rsplit(":", 1)[0]


@dataclass
class Visit:
    dom: str
    console: list[str]
    requests: list[str]  # the page's: request lines to hosts the blank page did not reach
    screenshot: Path | None
    browser_hosts: set[str] = field(default_factory=set)


def _run(exe: str, url: str, profile: Path, proxy: _Proxy, screenshot: Path | None, size: tuple[int, int]) -> tuple[str, str]:
    args = [exe, *FLAGS, f"--user-data-dir={profile}", f"--proxy-server=http://127.0.0.1:{proxy.port}",
            "--proxy-bypass-list=<-loopback>", f"--window-size={size[0]},{size[1]}", "--dump-dom"]
    if screenshot is not None:
        args.append(f"--screenshot={screenshot}")
    proc = subprocess.run([*args, url], capture_output=True, text=True, timeout=120)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout, proc.stderr


def visit(page: Path, work: Path, screenshot: Path | None = None, size: tuple[int, int] = (1100, 7000)) -> Visit:
    """Load `page` from disk (file://) in headless Chromium; `work` holds the profiles and the blank page."""
    exe = chromium()
    assert exe, "chromium is not installed"
    work.mkdir(parents=True, exist_ok=True)
    blank = work / "blank.html"
    blank.write_text(BLANK)
    proxy = _Proxy()
    try:
        _run(exe, blank.resolve().as_uri(), work / "profile-blank", proxy, None, (400, 300))
        own = {host_of(line) for line in proxy.lines} | BROWSER_HOSTS
        proxy.lines.clear()
        dom, stderr = _run(exe, page.resolve().as_uri(), work / "profile-page", proxy, screenshot, size)
        requests = [line for line in proxy.lines if host_of(line) not in own]
    finally:
        proxy.close()
    if screenshot is not None and screenshot.is_file():
        crop_to_content(screenshot)
    console = [line for line in stderr.splitlines() if CONSOLE.search(line)]
    return Visit(dom=dom, console=console, requests=requests, screenshot=screenshot, browser_hosts=own)


def crop_to_content(png: Path, margin: int = 32) -> None:
    """Cut the empty window height below the page's last dark pixel (a headless screenshot is the window's
    size, and the window is made taller than the page). Left as it is without Pillow."""
    try:
        from PIL import Image
    except ImportError:
        return
    with Image.open(png) as im:
        gray = im.convert("L")
        dark = gray.point(lambda v: 255 if v < 200 else 0)  # text and lines, not the pale backgrounds
        box = dark.getbbox()
        if box is None:
            return
        cropped = im.crop((0, 0, im.width, min(im.height, box[3] + margin)))
    cropped.save(png)


class Elements(HTMLParser):
    """Every element's tag and attributes, and the page's visible text, from a DOM dump."""

    def __init__(self, html: str) -> None:
        super().__init__()
        self.elements: list[tuple[str, dict[str, str]]] = []
        self.text_parts: list[str] = []
        self._skip = 0
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list) -> None:
        self.elements.append((tag, {k: v or "" for k, v in attrs}))
        if tag in ("style", "title"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "title") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text_parts.append(data)

    @property
    def text(self) -> str:
        return " ".join(" ".join(self.text_parts).split())

    def having(self, tag: str, **attrs: str) -> list[dict[str, str]]:
        """Elements of `tag` whose attributes contain each `attrs` value (class: one of its classes)."""
        out = []
        for t, a in self.elements:
            if t != tag:
                continue
            if all((v in a.get("class", "").split()) if k == "class_" else a.get(k) == v for k, v in attrs.items()):
                out.append(a)
        return out
