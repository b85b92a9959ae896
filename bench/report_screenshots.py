"""Screenshots of a run's report page at 1280 and 390 CSS px wide, for the docs (docs/img/report-1280.png,
report-390.png, and report-top.png, the top of the 1280 one, for the README): `make screenshots
RUN=runs/<run dir>` runs this, after `make demo` for the demo's pictures.

    python bench/report_screenshots.py --run-dir runs/<run dir> [--out-dir docs/img]

It writes the page to a temp dir (`selfimprove report`'s code, so the run dir is not touched), then has
headless Chromium (Debian's `chromium`) take each picture of the whole page. Chromium's window is at
least 500 px wide, so the page is loaded in an iframe of the wanted width inside a small wrapper page:
a first load measures the page's height (the wrapper's script reads the iframe, which needs
--allow-file-access-from-files), a second takes the picture at that height, which Pillow then cuts to
the iframe's width. The report page itself has no script; only the wrapper has one.

Why bench/ and not docs/: bench/ holds the repo's runnable maintenance scripts (demo_record.py re-takes the
demo's figures the same way), while docs/ is the mkdocs source tree, which would publish a .py as a file.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WIDTHS = (1280, 390)
TOP_HEIGHT = 1150  # px of the 1280 picture kept as report-top.png (the README's)
MAX_HEIGHT = 16_000  # px; Chromium's screenshots fail beyond about 16k: a taller page is cut there, and said
# No network: the page names no URL, and a proxy that does not exist makes sure nothing else is fetched either.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--proxy-server=http://127.0.0.1:9", "--allow-file-access-from-files"]
WRAPPER = """<!DOCTYPE html><html><head><meta charset="utf-8"></head><body style="margin:0;background:#fff">
<iframe id="page" src="report.html" style="border:0;display:block;width:{width}px;height:{height}px"></iframe>
<script>
document.getElementById("page").onload = () => {{
  const doc = document.getElementById("page").contentDocument;
  document.body.setAttribute("data-height", doc.documentElement.scrollHeight);
}};
</script></body></html>
"""


def chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if not exe:
        sys.exit("report_screenshots: chromium is not installed (make test-deps installs it with apt-get, as root)")
    return exe


def _chromium(args: list[str]) -> str:
    proc = subprocess.run([chromium(), *FLAGS, "--virtual-time-budget=5000", *args], capture_output=True, text=True,
                          timeout=180)
    if proc.returncode != 0:
        sys.exit(f"report_screenshots: chromium exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}")
    return proc.stdout


def shoot(page_dir: Path, width: int, out: Path) -> tuple[int, int]:
    """Save the page at `width` CSS px as `out`; return the picture's (width, height)."""
    wrapper = page_dir / f"wrapper-{width}.html"
    window = max(width, 500)
    wrapper.write_text(WRAPPER.format(width=width, height=2000))
    dom = _chromium([f"--window-size={window},2000", "--dump-dom", wrapper.resolve().as_uri()])
    m = re.search(r'data-height="(\d+)"', dom)
    if not m:
        sys.exit(f"report_screenshots: the page's height at {width} px was not measured (chromium ran no script?)")
    height = min(int(m.group(1)), MAX_HEIGHT)
    if int(m.group(1)) > MAX_HEIGHT:
        print(f"note: the page is {m.group(1)} px tall at {width} px; the picture is cut at {MAX_HEIGHT}")
    wrapper.write_text(WRAPPER.format(width=width, height=height))
    raw = page_dir / f"raw-{width}.png"
    _chromium([f"--window-size={window},{height}", f"--screenshot={raw}", wrapper.resolve().as_uri()])
    try:
        from PIL import Image
    except ImportError:  # the picture keeps the window's extra width, on the right
        shutil.copyfile(raw, out)
        print(f"note: Pillow is not installed: {out.name} is {window} px wide, the page's {width} px on its left")
        return window, height
    with Image.open(raw) as im:
        # 256 colours: text and flat charts lose nothing visible, and the PNG is about a third the size
        page = im.convert("RGB").crop((0, 0, min(width, im.width), min(height, im.height)))
        page.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
        if width == WIDTHS[0]:  # the README shows the page's top: verdict, contents, the start of the table
            top = page.crop((0, 0, page.width, min(TOP_HEIGHT, page.height)))
            top.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out.with_name("report-top.png"), optimize=True)
        return page.width, page.height


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run-dir", required=True, type=Path, help="the run dir whose page is pictured")
    parser.add_argument("--out-dir", default=Path("docs/img"), type=Path, help="where the PNGs go (default docs/img)")
    args = parser.parse_args(argv)

    from selfimprove.commands.report import table_or_error
    from selfimprove.report.page import write_report
    from selfimprove.rundir import RunDir

    rd = RunDir(args.run_dir).require()
    args.out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="report-shots-") as tmp:
        page_dir = Path(tmp)
        write_report(rd, table_or_error(rd), page_dir / "report.html")
        for width in WIDTHS:
            out = args.out_dir / f"report-{width}.png"
            w, h = shoot(page_dir, width, out)
            print(f"{out}: {w} x {h} px")
    return 0


if __name__ == "__main__":
    sys.exit(main())
