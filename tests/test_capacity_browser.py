"""The capacity report and the strategy comparison page in a real browser: headless
Chromium (Debian's `chromium`) opens each page from disk at 1,300 px wide with the network
off; a screenshot is taken, and the page must not overflow sideways, open with its answer
card, have loaded every image, and have asked for nothing outside itself.

Without a `chromium` on PATH the test is skipped, unless MEMH_REQUIRE_BROWSER=1 (CI sets
it after installing the package), in which case it fails.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from memharness.cli import main
from tests.test_capacity import EXAMPLE, _write_load, _write_sim

WIDTH = 1300
#: Runs after the page's load event and writes what it saw onto <body>, for --dump-dom.
_PROBE = """<script>
window.addEventListener('load', () => {
  const images = [...document.images];
  const first = document.body.firstElementChild;
  const requests = performance.getEntriesByType('resource').map(e => e.name);
  document.body.setAttribute('data-check', JSON.stringify({
    images: images.length,
    loaded: images.filter(i => i.complete && i.naturalWidth > 0).length,
    scroll_width: document.documentElement.scrollWidth,
    client_width: document.documentElement.clientWidth,
    first: first ? first.id : null,
    requests: requests.filter(name => !name.startsWith('data:')),
    rows: Object.fromEntries([...document.querySelectorAll('table[id]')].map(
      t => [t.id, t.querySelectorAll('tbody tr').length])),
  }));
});
</script>"""


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        if os.environ.get("MEMH_REQUIRE_BROWSER") == "1":
            pytest.fail("MEMH_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)")
        pytest.skip("no chromium on PATH (Debian: apt-get install chromium)")
    return found


def _run(browser: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    command = [
        browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        "--disable-background-networking", "--proxy-server=127.0.0.1:9",  # no network
        f"--user-data-dir={cwd / 'profile'}", "--virtual-time-budget=5000", *args,
    ]  # fmt: skip
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, cwd=cwd, check=False
    )


def probe_page(page: Path, tmp_path: Path) -> dict[str, object]:
    """Screenshot `page` at WIDTH px and what the probe saw after its load event."""
    browser = _chromium()
    shot = page.with_suffix(".png")
    taken = _run(
        browser, f"--screenshot={shot}", f"--window-size={WIDTH},3000", page.as_uri(), cwd=tmp_path
    )
    assert shot.is_file() and shot.stat().st_size > 20_000, taken.stderr[-2000:]
    probed = page.with_name(f"probed-{page.name}")
    probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    dumped = _run(
        browser, f"--window-size={WIDTH},3000", "--dump-dom", probed.as_uri(), cwd=tmp_path
    )
    match = re.search(r"data-check=\"([^\"]+)\"", dumped.stdout)
    assert match, dumped.stderr[-2000:]
    check: dict[str, object] = json.loads(match.group(1).replace("&quot;", '"'))
    expected_images = page.read_text().count("<img ")
    assert check["images"] == expected_images >= 1
    assert check["loaded"] == check["images"]  # every image decoded (naturalWidth > 0)
    assert check["first"] == "answer"  # the answer card is the first thing in the body
    assert isinstance(check["scroll_width"], int) and check["scroll_width"] <= WIDTH
    assert check["requests"] == []  # nothing fetched
    return check


def test_capacity_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    _chromium()
    _write_load(tmp_path / "load-h", strategy="hybrid", maintenance_cpu=0.003)
    _write_load(tmp_path / "load-k", strategy="keep_all", maintenance_cpu=0.001)
    _write_sim(tmp_path / "sim-small", 100)
    _write_sim(tmp_path / "sim-large", 1000)
    out = tmp_path / "plan"
    args = ["capacity", "--target", str(EXAMPLE), "--reports", str(tmp_path), "--out", str(out),
            "--strategy", "hybrid", "--strategy", "keep_all"]  # fmt: skip
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    check = probe_page(out / "capacity.html", tmp_path)
    assert check["images"] == 10  # five plots per strategy
    rows = check["rows"]
    assert isinstance(rows, dict)
    assert rows["answer-table"] == 2
    # session, stm, ltm, embedder, turn and the maintenance process
    assert rows["sizing-hybrid"] == rows["sizing-keep_all"] == 6


def test_comparison_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    from tests.test_comparison import write_capacity, write_sim, write_steps

    _chromium()
    runs = [
        write_sim(tmp_path / "sim"),
        write_steps(tmp_path / "load-h", "hybrid"),
        write_steps(tmp_path / "load-t", "typed_ttl"),
        write_capacity(
            tmp_path / "plan", {"hybrid": 900.0, "typed_ttl": 700.0, "keep_all": 1500.0}
        ),
    ]
    out = tmp_path / "page"
    result = CliRunner().invoke(main, ["report", *map(str, runs), "--out", str(out)])
    assert result.exit_code == 0, result.output
    check = probe_page(out / "report.html", tmp_path)
    assert check["images"] == 2
    rows = check["rows"]
    assert isinstance(rows, dict) and rows["quality"] == rows["load"] == 3
