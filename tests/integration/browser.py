"""report.html and compare.html in a real browser: Debian's headless Chromium (`chromium`,
`chromium-driver`: scripts/setup.sh installs both) driven by selenium, with nothing downloaded. One
load of a page reads everything a test checks: console messages, every request the page made
(Chromium's performance log), whether each image decoded, the verdict's lines, its box in a
1366x768 window, and a screenshot.

    with chromium(tmp_path) as browser:
        page = load(browser, report / "report.html", tmp_path / "shot.png")
        assert page.console == [] and page.requests == [] and page.broken_images == []
"""

from __future__ import annotations

import json
import shutil
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
WIDTH, HEIGHT = 1366, 768  # a laptop's first screen
# Root, no network: no sandbox, no GPU, nothing Chromium would fetch of its own accord.
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", f"--window-size={WIDTH},{HEIGHT}")


@dataclass
class Page:
    console: list[str]  # console messages of level WARNING or SEVERE (errors, a refused resource)
    requests: list[str]  # every URL the page asked for beyond itself and data: URIs
    broken_images: list[str]  # images that did not decode
    images: int
    checks: dict[str, str]  # the verdict's lines: check id -> state
    verdict_bottom: float  # the verdict section's bottom edge, in CSS pixels from the top
    viewport: tuple[int, int]
    sections: list[str]  # the ids of the page's sections, in order


@contextmanager
def chromium(tmp_path: Path):
    for tool in (CHROMIUM, CHROMEDRIVER):
        assert shutil.which(tool), f"{tool} missing: `make setup` installs chromium and chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        # The viewport itself at 1366x768, whatever the window's decorations take.
        driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                               {"width": WIDTH, "height": HEIGHT, "deviceScaleFactor": 1, "mobile": False})
        yield driver
    finally:
        driver.quit()


def load(driver, path: Path, screenshot: Path | None = None) -> Page:
    url = Path(path).resolve().as_uri()
    driver.get(url)
    console = [f"{e['level']}: {e['message']}" for e in driver.get_log("browser")
               if e["level"] in ("WARNING", "SEVERE")]
    requests = []
    for entry in driver.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message["method"] == "Network.requestWillBeSent" and message["params"].get("documentURL") == url:
            asked = message["params"]["request"]["url"]  # the browser's own pages (chrome://) are not the page's
            if asked != url and not asked.startswith("data:"):
                requests.append(asked)
    found = driver.execute_script("""
        const imgs = [...document.images];
        const verdict = document.getElementById('verdict');
        return {broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.alt),
                images: imgs.length,
                checks: Object.fromEntries([...document.querySelectorAll('#verdict tr[data-state]')]
                                           .map(tr => [tr.id.replace('check-', ''), tr.dataset.state])),
                bottom: verdict ? verdict.getBoundingClientRect().bottom + window.scrollY : -1,
                viewport: [window.innerWidth, window.innerHeight],
                sections: [...document.querySelectorAll('section[id]')].map(s => s.id)};""")
    if screenshot is not None:
        driver.save_screenshot(str(screenshot))
    return Page(console, requests, found["broken"], found["images"], found["checks"], found["bottom"],
                tuple(found["viewport"]), found["sections"])
