"""Time the Analyze page's full update in-process: engine, figures, table rows and the JSON
Dash sends to the browser.

    python -m viewer.bench [--repeats 20]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

QUERY = "?model=llama-2-7b&device=a6000&batch={batch}&seq_len=1024&generate=64&w_dtype=int8"


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    for serialize in (False, True):
        times = time_analyze_callback(args.repeats, serialize)
        what = "callback + JSON encoding" if serialize else "callback only"
        print(
            f"{what}: median {statistics.median(times) * 1e3:.1f} ms, "
            f"min {min(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms over {args.repeats} calls"
        )


if __name__ == "__main__":
    main()
