"""The statistics page's charts in a real browser (issue 20): Debian's chromium, headless, at a
phone's width (360 CSS pixels), against a real `archive-service serve` whose store holds a
month of uses built by hand. Both charts are drawn, visible, within the width, and the whole
page is saved as a picture (under tmp_path; docs/statistics.png is one of these)."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_process import serve_collection
from support import PHONE, SERVICE, png_facts, record_month_of_uses

pytestmark = [pytest.mark.process, pytest.mark.slow]

# Each chart's box as laid out, and whether the point at its middle is the chart's own.
CHARTS = """
return [...document.querySelectorAll('svg.chart')].map(svg => {
  const box = svg.getBoundingClientRect();
  svg.scrollIntoView();
  const now = svg.getBoundingClientRect();
  const hit = document.elementFromPoint(now.left + now.width / 2, now.top + now.height / 2);
  return [box.left, box.right, box.width, box.height, svg.contains(hit),
          getComputedStyle(svg).visibility, svg.querySelectorAll('rect.bar').length];
});
"""


@pytest.fixture
def served(collection: Path, tmp_path: Path):
    record_month_of_uses(tmp_path / "state")
    serve = serve_collection(tmp_path, collection, tmp_path / "state")
    try:
        serve.wait_answering(timeout=60)
        yield serve
        assert serve.stop() == 0
    finally:
        serve.kill()


def test_the_charts_fit_a_phone(served, phone_browser, tmp_path):
    width, height = PHONE
    phone_browser.get(f"http://{served.address}/{SERVICE}/statistics?month=2026-01")
    assert phone_browser.title.startswith("Statistics")
    charts = phone_browser.execute_script(CHARTS)
    assert [c[6] for c in charts] == [30, 12]
    for left, right, chart_width, chart_height, hit, visibility, _ in charts:
        assert visibility == "visible" and hit, charts
        assert 0 <= left and right <= width, f"the chart spans {left}..{right} of {width} px"
        assert chart_width > width * 0.8 and chart_height > 100, charts
    scroll = phone_browser.execute_script("return document.documentElement.scrollWidth")
    assert scroll <= width, f"the page is {scroll} px wide, more than the phone's {width}"

    # The whole page, as tall as it is, for people to look at.
    full = phone_browser.execute_script("return document.documentElement.scrollHeight")
    phone_browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": full, "deviceScaleFactor": 1, "mobile": True},
    )
    phone_browser.execute_script("window.scrollTo(0, 0)")
    shot = tmp_path / "statistics.png"
    shot.write_bytes(phone_browser.get_screenshot_as_png())
    got_width, got_height, rows = png_facts(shot.read_bytes())
    assert (got_width, got_height) == (width, full) and full > height
    assert rows > 100, f"the screenshot looks blank ({rows} distinct rows)"
