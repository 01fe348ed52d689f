"""Landing pages in a real browser (issue 32): Debian's chromium, headless, against a real
`archive-service serve`, at a phone's 390 x 844 and a desktop's 1280 x 900: a landing page
and a tombstone fit the width, the persistent URL is readable, the copy button shows (it
needs JavaScript), and each screenshot is saved for people to look at."""

from __future__ import annotations

import pytest

from support import SERVICE, png_facts

pytestmark = [pytest.mark.process, pytest.mark.slow]

SIZES = {"phone": (390, 844), "desktop": (1280, 900)}
PAGES = {
    "landing": f"/{SERVICE}/item/iconet.com.br/banon/2012/03.05.08.15",
    "tombstone": f"/{SERVICE}/item/iconet.com.br/banon/2010/01.20.11.05",
    "editions": f"/{SERVICE}/item/sid.inpe.br/mtc-m18/2012/07.12.18.08",
}


def test_landing_pages_fit_a_phone_and_a_desktop(served_copy, phone_browser, tmp_path):
    for size, (width, height) in SIZES.items():
        phone_browser.execute_cdp_cmd(
            "Emulation.setDeviceMetricsOverride",
            {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": size == "phone"},
        )
        for name, path in PAGES.items():
            phone_browser.get(f"http://{served_copy.address}{path}")
            purl = phone_browser.find_element("id", "purl")
            assert purl.get_attribute("value").endswith(path.split("/item/")[1])
            assert phone_browser.find_element("id", "copy").is_displayed(), (size, name)
            scroll = phone_browser.execute_script("return document.documentElement.scrollWidth")
            assert scroll <= width, f"{name} at {size}: {scroll} px wide, more than {width}"
            shot = tmp_path / f"{name}-{size}.png"
            shot.write_bytes(phone_browser.get_screenshot_as_png())
            got_width, got_height, rows = png_facts(shot.read_bytes())
            assert (got_width, got_height) == (width, height), (name, size)
            assert rows > 20, f"{name} at {size}: the screenshot looks blank"
