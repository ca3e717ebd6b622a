"""The capacity report in a real browser: headless Chromium (Debian's `chromium`) opens
capacity.html from disk with the network off, a screenshot is taken, and every image must
have loaded and the sizing table be there.

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

#: Runs after the page's load event and writes what it saw onto <body>, for --dump-dom.
_PROBE = """<script>
window.addEventListener('load', () => {
  const images = [...document.images];
  const table = document.getElementById('sizing');
  document.body.setAttribute('data-check', JSON.stringify({
    images: images.length,
    loaded: images.filter(i => i.complete && i.naturalWidth > 0).length,
    sizing_rows: table ? table.querySelectorAll('tbody tr').length : -1,
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


def test_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    browser = _chromium()
    _write_load(tmp_path / "load-a")
    _write_sim(tmp_path / "sim-small", 100)
    _write_sim(tmp_path / "sim-large", 1000)
    out = tmp_path / "plan"
    args = ["capacity", "--target", str(EXAMPLE), "--reports", str(tmp_path), "--out", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    page = out / "capacity.html"
    shot = out / "capacity.png"
    taken = _run(
        browser, f"--screenshot={shot}", "--window-size=1280,4000", page.as_uri(), cwd=tmp_path
    )
    assert shot.is_file() and shot.stat().st_size > 20_000, taken.stderr[-2000:]
    probed = out / "probed.html"
    probed.write_text(page.read_text().replace("</body>", _PROBE + "</body>"))
    dumped = _run(browser, "--dump-dom", probed.as_uri(), cwd=tmp_path)
    match = re.search(r"data-check=\"([^\"]+)\"", dumped.stdout)
    assert match, dumped.stderr[-2000:]
    check = json.loads(match.group(1).replace("&quot;", '"'))
    expected_images = page.read_text().count("<img ")
    assert check["images"] == expected_images >= 5
    assert check["loaded"] == check["images"]
    assert check["sizing_rows"] == 5  # session, stm, ltm, embedder, turn
