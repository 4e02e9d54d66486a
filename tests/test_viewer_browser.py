"""The real dashboard in headless Chromium: change model, batch and quantisation in the page
and check the cards show the engine's numbers, with no browser console errors.

Needs Debian's ``chromium`` + ``chromium-driver`` and ``selenium``; skipped without them.
"""

from __future__ import annotations

import json
import time

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore::DeprecationWarning:dash")]

selenium = pytest.importorskip("selenium")
pytest.importorskip("dash")

from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

import ridgeline as rl  # noqa: E402
from ridgeline.engine.workload import Settings
from viewer import figures, ids  # noqa: E402
from viewer.screenshots import PAGES, chrome, chromium_paths, fit_to_page, serve_in_thread, wait_for, wait_idle  # noqa: E402

if chromium_paths() is None:
    pytest.skip("chromium and chromedriver are not installed", allow_module_level=True)

CARDS = ("ttft", "tpot", "throughput", "peak", "fits")


@pytest.fixture(scope="module")
def page():
    with serve_in_thread() as base, chrome(1400, 1000) as driver:
        driver.base = base
        yield driver


def state_element(driver, key: str):
    dom_id = json.dumps(ids.state(key), sort_keys=True, separators=(",", ":"))
    return driver.execute_script("return document.getElementById(arguments[0])", dom_id)


def choose(driver, key: str, value: str) -> None:
    """Open a dropdown and click the option showing ``value``."""
    state_element(driver, key).click()
    wait = WebDriverWait(driver, 10)
    option = wait.until(
        lambda d: next(
            (
                o
                for o in d.find_elements(By.CSS_SELECTOR, "[role=option]")
                if o.text == value and "radioitems" not in (o.get_attribute("class") or "")
            ),
            None,
        )
    )
    option.click()


def type_number(driver, key: str, value: int) -> None:
    box = state_element(driver, key)
    box.send_keys(Keys.CONTROL, "a")
    box.send_keys(str(value), Keys.ENTER)


def cards_shown(driver) -> dict[str, str]:
    return {k: driver.find_element(By.ID, ids.card(k)).text for k in CARDS}


def wait_for_cards(driver, expected: dict[str, str], timeout: float = 20) -> None:
    try:
        WebDriverWait(driver, timeout).until(lambda d: cards_shown(d) == expected)
    except Exception:
        assert cards_shown(driver) == expected  # shows the difference


def engine_cards(model, batch, w_dtype="fp16", seq_len=512, generate=128):
    a = rl.analyze(model, "a6000", batch=batch, seq_len=seq_len, generate=generate, settings=Settings(w_dtype=w_dtype))
    return figures.format_cards(a)


def severe_logs(driver) -> list:
    return [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]


def test_changing_model_batch_and_quantisation_updates_the_numbers(page):
    start = time.monotonic()
    page.get(page.base + "/analyze?model=llama-2-7b&device=a6000&batch=1&seq_len=512&generate=128")
    wait_for(page, "#roofline .main-svg")
    wait_for_cards(page, engine_cards("llama-2-7b", 1))

    choose(page, "model", "qwen2-7b")
    wait_for_cards(page, engine_cards("qwen2-7b", 1))
    assert "model=qwen2-7b" in page.current_url

    type_number(page, "batch", 16)
    wait_for_cards(page, engine_cards("qwen2-7b", 16))

    choose(page, "w_dtype", "int4")
    expected = engine_cards("qwen2-7b", 16, "int4")
    wait_for_cards(page, expected)
    assert expected != engine_cards("qwen2-7b", 16)  # quantisation really changed the numbers
    assert "w_dtype=int4" in page.current_url and "batch=16" in page.current_url

    # the URL is the whole view: reloading it shows the same numbers
    page.get(page.current_url)
    wait_for(page, "#roofline .main-svg")
    wait_for_cards(page, expected)
    assert state_element(page, "batch").get_attribute("value") == "16"

    # a setting the device cannot run shows one error line and keeps the numbers
    page.get(page.base + "/analyze?model=qwen2-7b&device=tpu-v5e&batch=16&w_dtype=fp16")
    WebDriverWait(page, 20).until(lambda d: d.find_element(By.ID, ids.ANALYZE_ERROR).text.startswith("error: "))
    assert severe_logs(page) == []
    assert time.monotonic() - start < 60


def test_every_page_draws_without_console_errors(page):
    page.get_log("browser")  # drop what came before
    for name, ready in (
        ("layer", "#layer-roofline .main-svg"),
        ("sweep", "#sweep-graph .main-svg"),
        ("compare", "#compare-graph .main-svg"),
        ("validation", "#validation-message"),
    ):
        page.get(f"{page.base}/{name}?model=llama-3.2-1b&batch=4")
        wait_for(page, ready)
        assert page.find_element(By.ID, ids.page(name)).is_displayed()
        assert not page.find_elements(By.ID, ids.page("analyze"))  # only the shown page is mounted
        assert len(page.find_elements(By.CSS_SELECTOR, ".js-plotly-plot")) <= 4  # its graphs only
    # clicking a tab changes the page and keeps the settings
    page.find_element(By.XPATH, "//*[@id='page-tabs']//*[text()='Analyze']").click()
    WebDriverWait(page, 10).until(lambda d: d.find_element(By.ID, ids.page("analyze")).is_displayed())
    assert "/analyze" in page.current_url and "model=llama-3.2-1b" in page.current_url
    assert severe_logs(page) == []


def test_uploads_in_the_page(page, tmp_path):
    page.get(page.base + "/analyze?model=llama-2-7b&device=a6000&batch=2&seq_len=512&generate=128")
    wait_for(page, "#roofline .main-svg")
    before = engine_cards("llama-2-7b", 2)
    wait_for_cards(page, before)
    file_input = page.find_element(By.CSS_SELECTOR, f"#{ids.MODEL_UPLOAD} input[type=file]")
    bad = tmp_path / "broken.json"
    bad.write_text('{"model_type": "llama", "hidden_size": ')
    file_input.send_keys(str(bad))
    WebDriverWait(page, 20).until(lambda d: "malformed JSON" in d.find_element(By.ID, ids.UPLOAD_ERROR).text)
    assert cards_shown(page) == before and "model=llama-2-7b" in page.current_url

    from ridgeline.io.catalog import MODELS_DIR

    good = tmp_path / "my-model.json"
    good.write_text((MODELS_DIR / "llama-3.2-1b.json").read_text())
    page.find_element(By.CSS_SELECTOR, f"#{ids.MODEL_UPLOAD} input[type=file]").send_keys(str(good))
    wait_for_cards(page, engine_cards("llama-3.2-1b", 2))
    assert "model=upload%3Amy-model" in page.current_url
    assert page.find_element(By.ID, ids.UPLOAD_ERROR).text == ""
    assert severe_logs(page) == []


def test_bad_url_values_show_a_message_not_a_blank_menu(page):
    page.get(page.base + "/analyze?model=/etc/passwd&batch=-4&hardware=h100-sxm")
    wait_for(page, "#roofline .main-svg")
    WebDriverWait(page, 20).until(lambda d: d.find_element(By.ID, ids.URL_ERROR).text != "")
    message = page.find_element(By.ID, ids.URL_ERROR).text
    assert "model='/etc/passwd'" in message and "batch='-4'" in message
    # the menus show what the page computes: the default model, the URL's device (alias)
    model_menu = state_element(page, "model").text
    assert "llama-2-7b" in model_menu
    assert "h100-sxm" in state_element(page, "device").text
    wait_for_cards(page, figures.format_cards(rl.analyze("llama-2-7b", "h100-sxm", batch=1, seq_len=512, generate=128)))
    # a good URL clears the message
    page.get(page.base + "/analyze?model=llama-2-7b&batch=2")
    WebDriverWait(page, 20).until(lambda d: d.find_element(By.ID, ids.URL_ERROR).text == "")
    assert severe_logs(page) == []


def test_validation_page_hides_the_sidebar(page):
    page.get(page.base + "/validation")
    wait_for(page, "#validation-message")
    WebDriverWait(page, 10).until(lambda d: not d.find_element(By.ID, ids.SIDEBAR).is_displayed())
    page.find_element(By.XPATH, "//*[@id='page-tabs']//*[text()='Sweep']").click()
    WebDriverWait(page, 10).until(lambda d: d.find_element(By.ID, ids.SIDEBAR).is_displayed())


def test_validation_page_draws_a_committed_run_s_waterfall(page):
    page.get(page.base + "/validation?runs=cuda-nvidia-h200")
    wait_for(page, f"#{ids.VALIDATION_WATERFALL} .main-svg")
    script = "return document.querySelector(arguments[0]).data.map(t => [t.type, t.x.length])"
    traces = WebDriverWait(page, 20).until(
        lambda d: d.execute_script(script, f"#{ids.VALIDATION_WATERFALL} .js-plotly-plot") or None
    )
    assert traces == [["waterfall", 8]]  # spec, six parts, measured
    chosen = page.find_element(By.ID, ids.VALIDATION_WATERFALL_RUN).text
    assert chosen.startswith("gpu-runs/cuda-nvidia-h200")
    assert severe_logs(page) == []


def test_screenshot_window_holds_the_whole_serving_page(page):
    """What ``python -m viewer.screenshots`` captures of the Serving page reaches past the
    bottom of its last chart, the Plan (the window's own bars once cut its foot off)."""
    query, ready = PAGES["serving"]
    page.get(f"{page.base}/serving{query}")
    wait_for(page, ready)
    wait_idle(page)
    try:
        fit_to_page(page, 1400)
        script = "return [document.getElementById(arguments[0]).getBoundingClientRect().bottom, window.innerHeight]"
        bottom, shown = page.execute_script(script, ids.PLAN_GRAPH)
        assert bottom <= shown
    finally:
        page.set_window_size(1400, 1000)


def test_timing_of_every_page(page, record_property):
    """Reports (prints, and records in the JUnit XML) how long each page takes, from asking
    for its URL until its numbers show (``viewer.bench.SHOWN``): the first load, then two
    more. No bound is asserted: the time depends on the machine and its load. Run
    ``pytest -s tests/test_viewer_browser.py -k timing``, or ``python -m viewer.bench --pages``."""
    from viewer.bench import page_report, time_pages

    times = time_pages(page, page.base, repeats=2)
    print("\n" + page_report(times))
    for name, seconds in times.items():
        record_property(f"{name}_seconds", [round(t, 3) for t in seconds])
    assert set(times) == set(PAGES) and all(len(ts) == 3 for ts in times.values())  # every page showed numbers
    assert severe_logs(page) == []
