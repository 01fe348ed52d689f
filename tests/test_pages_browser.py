"""The Archive's pages in a real browser (issue 18): Debian's chromium, headless, at a phone's
width (360 CSS pixels), against a real `archive-service serve`. Each page fits the width (no
horizontal scrolling) and its screenshot is a 360 x 800 picture with something on it."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_process import serve_collection
from support import PHONE, SERVICE, png_facts

pytestmark = [pytest.mark.process, pytest.mark.slow]

PAGES = {
    "archive": "/",
    "items": f"/{SERVICE}/items",
    "search": f"/{SERVICE}/items?q=banon",
    "about": f"/{SERVICE}/about",
    "statistics": f"/{SERVICE}/statistics",
    "filelist": f"/{SERVICE}/filelist/iconet.com.br/banon/2009/09.09.22.01",
    "metadata": f"/{SERVICE}/metadata/iconet.com.br/banon/2012/03.05.08.15",
}


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


@pytest.fixture
def served(collection: Path, tmp_path: Path):
    serve = serve_collection(tmp_path, collection, tmp_path / "state")
    try:
        serve.wait_answering(timeout=60)
        yield serve
        assert serve.stop() == 0
    finally:
        serve.kill()


def test_the_pages_fit_a_phone_and_show_something(served, phone_browser, shots):
    width, height = PHONE
    for name, path in PAGES.items():
        phone_browser.get(f"http://{served.address}{path}")
        title = phone_browser.title
        assert title and "Error" not in title, (name, title)
        inner = phone_browser.execute_script("return window.innerWidth")
        assert inner == width, (name, inner)  # the viewport meta at work
        scroll = phone_browser.execute_script("return document.documentElement.scrollWidth")
        assert scroll <= width, f"{name}: {scroll} px wide, more than the phone's {width}"
        png = phone_browser.get_screenshot_as_png()
        shot = shots / f"{name}.png"
        shot.write_bytes(png)
        got_width, got_height, rows = png_facts(shot.read_bytes())
        assert (got_width, got_height) == (width, height), (name, got_width, got_height)
        assert rows > 20, f"{name}: the screenshot looks blank ({rows} distinct rows)"
