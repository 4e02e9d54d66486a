"""Time the dashboard: the Analyze page's full update in-process (engine, figures, table rows
and the JSON Dash sends to the browser), and every page in headless Chromium (from asking for
its URL until its numbers show).

    python -m viewer.bench [--repeats 20]          # the Analyze callback, in-process
    python -m viewer.bench --callbacks [--repeats 5]  # every page's callbacks, in-process
    python -m viewer.bench --pages [--repeats 5]   # each page in headless Chromium
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

from viewer import ids

QUERY = "?model=llama-2-7b&device=a6000&batch={batch}&seq_len=1024&generate=64&w_dtype=int8"

# page -> what must be on screen for its numbers to show: (elements whose text is not
# empty, graphs holding at least one trace)
SHOWN = {
    "analyze": ((ids.card("ttft"),), (ids.ROOFLINE,)),
    "layer": ((), (ids.LAYER_ROOFLINE,)),
    "sweep": ((), (ids.SWEEP_GRAPH,)),
    "compare": ((ids.COMPARE_TABLE,), (ids.COMPARE_GRAPH,)),
    "validation": ((ids.VALIDATION_MESSAGE,), (ids.VALIDATION_SCATTER,)),
    "serving": ((ids.SERVING_SUMMARY, ids.PLAN_SUMMARY), (ids.SERVING_LATENCY, ids.PLAN_GRAPH)),
}
NUMBERS_SHOWN = """
const [texts, graphs] = arguments;
const text = id => (document.getElementById(id) || {}).innerText || "";
const traces = id => ((document.querySelector(`#${id} .js-plotly-plot`) || {}).data || []).length;
return texts.every(id => text(id).trim() !== "") && graphs.every(id => traces(id) > 0);
"""


def time_analyze_callback(repeats: int = 20, serialize: bool = True) -> list[float]:
    """Seconds per call of ``callbacks.update_analyze`` (a different batch each call, so
    nothing is cached); with ``serialize`` the outputs are also encoded as Dash does."""
    from plotly.utils import PlotlyJSONEncoder

    from viewer.callbacks import update_analyze

    json.dumps(update_analyze("/", QUERY.format(batch=1), None), cls=PlotlyJSONEncoder)  # warm
    times = []
    for i in range(repeats):
        start = time.perf_counter()
        out = update_analyze("/", QUERY.format(batch=i + 2), None)
        if serialize:
            json.dumps(out, cls=PlotlyJSONEncoder)
        times.append(time.perf_counter() - start)
    return times


def page_callbacks() -> dict[str, Callable[[str], Any]]:
    """Each page's server work for one view (its screenshot's query): name -> a function of
    the query running that page's callbacks as a page load does."""
    from viewer import callbacks, plan, serving

    return {
        "analyze": lambda q: callbacks.update_analyze("/analyze", q, None),
        "layer": lambda q: callbacks.update_layer("/layer", q, None, None),
        "sweep": lambda q: callbacks.update_sweep("/sweep", q, None),
        "compare": lambda q: callbacks.update_compare("/compare", q, None),
        "validation": lambda q: (
            callbacks.update_validation("/validation", q),
            callbacks.waterfall_choices("/validation", q),
        ),
        "serving": lambda q: serving.update_serving("/serving", q, None),
        "serving-bands": lambda q: serving.update_serving_bands(None, "/serving", q, None),
        "plan": lambda q: plan.update_plan("/serving", q, None),
    }


def time_callbacks(repeats: int = 5) -> dict[str, list[float]]:
    """Seconds per page load's callbacks (``page_callbacks``) with their JSON encoding, each
    call a view not computed before (the screenshot's query with another batch, which the
    pages' memos key on), so every call does the page's whole work."""
    from plotly.utils import PlotlyJSONEncoder

    from viewer.screenshots import PAGES

    times: dict[str, list[float]] = {}
    for name, run in page_callbacks().items():
        query = PAGES["serving" if name in ("plan", "serving-bands") else name][0]
        times[name] = []
        for i in range(repeats):
            start = time.perf_counter()
            json.dumps(run(f"{query}&batch={100 + i}"), cls=PlotlyJSONEncoder)
            times[name].append(time.perf_counter() - start)
    return times


def callback_report(times: dict[str, list[float]]) -> str:
    """One line per page: the median (min, max) of its callbacks' time."""
    return "\n".join(
        f"{name:<11} median {statistics.median(ts) * 1e3:.0f} ms "
        f"(min {min(ts) * 1e3:.0f}, max {max(ts) * 1e3:.0f}, {len(ts)} views)"
        for name, ts in times.items()
    )


def time_page(driver, url: str, page: str, timeout: float = 60.0) -> float:
    """Seconds from asking ``driver`` for ``url`` until ``page``'s numbers show (``SHOWN``)."""
    texts, graphs = SHOWN[page]
    driver.get("about:blank")
    start = time.perf_counter()
    driver.get(url)
    while not driver.execute_script(NUMBERS_SHOWN, list(texts), list(graphs)):
        if time.perf_counter() - start > timeout:
            raise TimeoutError(f"{page}: no numbers after {timeout:.0f} s")
        time.sleep(0.02)
    return time.perf_counter() - start


def time_pages(driver, base: str, repeats: int = 3) -> dict[str, list[float]]:
    """Each page of ``viewer.screenshots.PAGES`` (its screenshot's URL): the first load (the
    server computes the view), then ``repeats`` more (the browser's cache warm, and the
    views the server keeps per URL, the Serving page's, kept)."""
    from viewer.screenshots import PAGES

    urls = {page: f"{base}/{page}{query}" for page, (query, _) in PAGES.items()}
    return {page: [time_page(driver, url, page) for _ in range(1 + repeats)] for page, url in urls.items()}


def page_report(times: dict[str, list[float]]) -> str:
    """One line per page: its first load, then the median (min, max) of the others."""
    return "\n".join(
        f"{page:<11} first {ts[0]:.2f} s, then median {statistics.median(ts[1:]):.2f} s "
        f"(min {min(ts[1:]):.2f}, max {max(ts[1:]):.2f}, {len(ts) - 1} loads)"
        for page, ts in times.items()
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--pages", action="store_true", help="time each page in headless Chromium")
    parser.add_argument("--callbacks", action="store_true", help="time every page's callbacks in-process")
    args = parser.parse_args()
    if args.callbacks:
        print(callback_report(time_callbacks(args.repeats)))
        return
    if args.pages:
        from viewer.screenshots import chrome, serve_in_thread

        with serve_in_thread() as base, chrome(1400, 1000) as driver:
            print(page_report(time_pages(driver, base, args.repeats)))
        return
    for serialize in (False, True):
        times = time_analyze_callback(args.repeats, serialize)
        what = "callback + JSON encoding" if serialize else "callback only"
        print(
            f"{what}: median {statistics.median(times) * 1e3:.1f} ms, "
            f"min {min(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms over {args.repeats} calls"
        )


if __name__ == "__main__":
    main()
