"""PNG screenshots of every page of the real app in headless Chromium.

    python -m viewer.screenshots [--out reports/screenshots] [--dark] [--small]

Pages at a 1400 x 1000 window ('sweep.png'); ``--small`` at 1024 x 768 ('sweep-1024.png').

Also the helpers the browser test uses: a stoppable in-process server on a free loopback
port and a headless Chromium driver with a fresh profile.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

from ridgeline.io.catalog import REPORTS_DIR

SHOTS_DIR = REPORTS_DIR / "screenshots"
CHROME_FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-dev-shm-usage",
)
# page -> the query that shows it well, and the element whose presence means it has drawn
PAGES = {
    "analyze": ("?model=llama-2-7b&device=a6000&batch=8&seq_len=1024&generate=256", "#roofline .main-svg"),
    "layer": (
        "?model=llama-2-7b&device=a6000&batch=8&seq_len=1024&generate=256&stage=decode",
        "#layer-roofline .main-svg",
    ),
    "sweep": (
        "?model=llama-2-13b&device=a6000&batch=1&seq_len=2048&generate=256&sweep_x=batch&sweep_dtypes=fp16,int8,int4",
        "#sweep-graph .main-svg",
    ),
    "compare": (
        "?model=llama-3-8b&batch=16&seq_len=1024&generate=256&devices=a6000,a100-80gb,h100-sxm,l40s,rtx-4090",
        "#compare-graph .main-svg",
    ),
    "validation": ("?runs=cuda-nvidia-h100-80gb-hbm3", "#validation-message"),
    "serving": (
        "?model=llama-3-8b&device=h100-sxm&serving_rates=5,10,20,30&plan_devices=a100-80gb,h100-sxm,h200",
        "#plan-graph .main-svg",
    ),
}


def chromium_paths() -> tuple[str, str] | None:
    """(chromium binary, chromedriver) or None when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser") or shutil.which("google-chrome")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


@contextmanager
def serve_in_thread(app=None):
    """Run the Dash app on 127.0.0.1 at a free port in a thread; yields its base URL."""
    import logging

    from werkzeug.serving import make_server

    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    if app is None:
        from viewer.app import create_app

        app = create_app()
    server = make_server("127.0.0.1", 0, app.server, threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        thread.join(timeout=5)


@contextmanager
def chrome(width: int = 1500, height: int = 1000, dark: bool = False):
    """A headless Chromium driver with a fresh profile, browser logs enabled."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    paths = chromium_paths()
    if paths is None:
        raise RuntimeError("chromium and chromedriver are needed: apt-get install chromium chromium-driver")
    profile = tempfile.mkdtemp(prefix="ridgeline-chrome-")
    options = webdriver.ChromeOptions()
    options.binary_location = paths[0]
    for flag in CHROME_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.add_argument(f"--window-size={width},{height}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(paths[1]), options=options)
    if dark:  # what a browser whose user prefers dark reports to the page's CSS
        driver.execute_cdp_cmd(
            "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": "dark"}]}
        )
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_for(driver, css: str, timeout: float = 20.0):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(EC.presence_of_element_located((By.CSS_SELECTOR, css)))


def wait_idle(driver, timeout: float = 20.0) -> None:
    """Until Dash has no callback in flight (the page title is not 'Updating...')."""
    end = time.monotonic() + timeout
    time.sleep(0.3)
    while time.monotonic() < end:
        busy = driver.execute_script("return document.querySelectorAll('[data-dash-is-loading=\"true\"]').length")
        if not busy:
            return
        time.sleep(0.1)


# the page's full height and the height the window shows of it
PAGE_HEIGHTS = (
    "return [Math.max(document.body.scrollHeight, document.documentElement.scrollHeight), window.innerHeight]"
)
MAX_HEIGHT = 4000  # px: the tallest window a screenshot grows to


def fit_to_page(driver, width: int, tries: int = 4) -> None:
    """Grow the window until what it shows holds the whole page: the browser's own bars take
    part of the window's height, and plotly re-lays out on resize (the page may grow)."""
    for _ in range(tries):
        page, shown = driver.execute_script(PAGE_HEIGHTS)
        if shown >= page:
            return
        window = driver.get_window_size()["height"]
        driver.set_window_size(width, min(window + int(page) - int(shown), MAX_HEIGHT))
        time.sleep(0.8)
        wait_idle(driver)


def full_page_png(driver, path: Path, width: int) -> None:
    """Grow the window to the page (``fit_to_page``) and save a PNG."""
    fit_to_page(driver, width)
    driver.save_screenshot(str(path))


SMALL = (1024, 768)  # px: the small window every page is checked at too


def take_screenshots(
    out: Path = SHOTS_DIR, dark: bool = False, width: int = 1400, height: int = 1000, suffix: str = ""
) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    with serve_in_thread() as base, chrome(width, height, dark) as driver:
        for page, (query, ready) in PAGES.items():
            driver.set_window_size(width, height)
            driver.get(f"{base}/{page}{query}")
            wait_for(driver, ready, 60)
            wait_idle(driver, 60)
            time.sleep(1.5)
            wait_idle(driver, 60)  # a page's later callbacks (the Serving page's Plan) grow it
            path = out / f"{page}{'-dark' if dark else ''}{suffix}.png"
            full_page_png(driver, path, width)
            written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=SHOTS_DIR)
    parser.add_argument("--dark", action="store_true", help="emulate a browser preferring dark")
    parser.add_argument("--small", action="store_true", help=f"a {SMALL[0]} x {SMALL[1]} window")
    args = parser.parse_args()
    size = {"width": SMALL[0], "height": SMALL[1], "suffix": f"-{SMALL[0]}"} if args.small else {}
    for path in take_screenshots(args.out, args.dark, **size):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
