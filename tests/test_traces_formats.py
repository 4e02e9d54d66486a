"""Trace formats (BurstGPT, Mooncake, generic and Azure), streaming, --trace-window and bad rows."""

from __future__ import annotations

import json

import numpy as np
import pytest
from typer.testing import CliRunner

import ridgeline.io.traces as traces
from ridgeline.cli import app
from ridgeline.errors import RidgelineError
from ridgeline.io.traces import load_trace, parse_prefix, parse_window

runner = CliRunner()

BURST_HEADER = "Timestamp,Session ID,Elapsed time,Model,Request tokens,Response tokens,Total tokens,Log Type\n"
BURST_ROWS = [
    "5,,1.2,ChatGPT,472,18,490,Conversation log",
    "45,,2.0,ChatGPT,1087,230,1317,API log",
    "46,s7,0.5,ChatGPT,100,0,100,Conversation log",  # failed: 0 response tokens
    "40,,3.1,GPT-4,417,276,693,Conversation log",  # before the row above it: sorted
    "118,s7,0.9,GPT-4,300,0,300,API log",  # failed
    "130,s8,4.0,GPT-4,64,32,96,Conversation log",
]


def write(tmp_path, name: str, text: str):
    path = tmp_path / name
    path.write_text(text)
    return path


def burst(tmp_path, rows=BURST_ROWS):
    return write(tmp_path, "BurstGPT_1.csv", BURST_HEADER + "\n".join(rows) + "\n")


def mooncake(tmp_path, records: list[dict], name="trace.jsonl"):
    return write(tmp_path, name, "".join(json.dumps(r) + "\n" for r in records))


MOON = [
    {"timestamp": 0, "input_length": 6755, "output_length": 500, "hash_ids": list(range(14))},
    {"timestamp": 0, "input_length": 1024, "output_length": 3, "hash_ids": [0, 14]},
    {"timestamp": 3052, "input_length": 513, "output_length": 1, "hash_ids": [0, 15]},
]


def test_burstgpt_skips_failed_rows_and_counts_them(tmp_path):
    t = load_trace(burst(tmp_path))
    np.testing.assert_array_equal(t.time_s, [0.0, 35.0, 40.0, 125.0])  # seconds from the first, sorted
    np.testing.assert_array_equal(t.prompt, [472, 417, 1087, 64])
    np.testing.assert_array_equal(t.output, [18, 276, 230, 32])
    assert t.about == {
        "format": "burstgpt",
        "rows": 6,
        "requests": 4,
        "failed_skipped": 2,
        "out_of_order_sorted": 1,
    }
    assert t.hash_ids is None


def test_burstgpt_log_type_filter(tmp_path):
    t = load_trace(burst(tmp_path), log_type="API log")
    np.testing.assert_array_equal(t.prompt, [1087])
    assert t.about["failed_skipped"] == 1 and t.about["log_type"] == "API log"
    with pytest.raises(RidgelineError, match="no requests with Log Type 'api' \\(the trace has 'API log', 'Conv"):
        load_trace(burst(tmp_path), log_type="api")


def test_mooncake_times_are_milliseconds_and_ids_travel(tmp_path):
    t = load_trace(mooncake(tmp_path, MOON))
    np.testing.assert_allclose(t.time_s, [0.0, 0.0, 3.052])
    assert list(t.prompt) == [6755, 1024, 513] and list(t.output) == [500, 3, 1]
    assert t.hash_block == 512
    assert [list(ids) for ids in t.hash_ids] == [list(range(14)), [0, 14], [0, 15]]
    assert t.about == {"format": "mooncake", "rows": 3, "requests": 3}


def test_a_window_keeps_its_requests_and_starts_at_the_first(tmp_path):
    """[40, 120) s from the first request (at 5 s) keeps the rows at 45, 46 (failed) and
    118 (failed) s, not the one at 130 (125 s from the first): one request, at time 0."""
    t = load_trace(burst(tmp_path), window=(40.0, 120.0))
    np.testing.assert_array_equal(t.prompt, [1087])
    assert t.time_s[0] == 0.0 and t.about["failed_skipped"] == 2 and t.about["window_s"] == [40.0, 120.0]
    moon = load_trace(mooncake(tmp_path, MOON), window=(0.0, 3.0))
    assert list(moon.prompt) == [6755, 1024] and len(moon.hash_ids) == 2


def test_the_window_counts_from_the_earliest_request_wherever_it_is(tmp_path, monkeypatch):
    """The earliest request comes last, in a later chunk: the window moves to it and the
    rows are selected again."""
    monkeypatch.setattr(traces, "CHUNK_ROWS", 2)
    rows = ["arrival_s,prompt_tokens,output_tokens", "10,1,1", "11,2,1", "12,3,1", "0,4,1"]
    path = write(tmp_path, "t.csv", "\n".join(rows) + "\n")
    t = load_trace(path, window=(10.0, 11.5))
    np.testing.assert_array_equal(t.prompt, [1, 2])
    np.testing.assert_array_equal(t.time_s, [0.0, 1.0])
    assert t.about["out_of_order_sorted"] == 1


def test_chunks_change_nothing(tmp_path, monkeypatch):
    """Read 2 rows at a time, a trace gives what it gives read whole; a bad row in a later
    chunk is named by its line."""
    whole = load_trace(burst(tmp_path))
    monkeypatch.setattr(traces, "CHUNK_ROWS", 2)
    chunked = load_trace(burst(tmp_path))
    for name in ("time_s", "prompt", "output"):
        np.testing.assert_array_equal(getattr(whole, name), getattr(chunked, name))
    assert whole.about == chunked.about
    with pytest.raises(RidgelineError, match=r"BurstGPT_1.csv:7: Request tokens is negative"):
        load_trace(burst(tmp_path, [*BURST_ROWS[:5], "130,,1,GPT-4,-3,2,-1,API log"]))


def test_an_empty_window_says_what_the_trace_spans(tmp_path):
    with pytest.raises(
        RidgelineError, match=r"no requests in --trace-window 200,300 \(the trace's requests span 0 to 125 s\)"
    ):
        load_trace(burst(tmp_path), window=(200.0, 300.0))


@pytest.mark.parametrize(
    "rows, message",
    [
        (["5,,1,ChatGPT,nan,3,4,API log"], ":2: Request tokens is not a finite number (got 'nan')"),
        (["5,,1,ChatGPT,,3,4,API log"], ":2: Request tokens is not a finite number (got empty)"),
        (["5,,1,ChatGPT,10,3,13,API log", "6,,1,ChatGPT,10,-1,9,API log"], ":3: Response tokens is negative"),
        (["5,,1,ChatGPT,10.5,3,13,API log"], ":2: Request tokens must hold whole token counts (got 10.5)"),
        (["5,,1,ChatGPT,0,3,3,API log"], ":2: Request tokens is below 1: prompt tokens < 1"),
        (["-5,,1,ChatGPT,10,3,13,API log"], ":2: Timestamp is negative; times count from the trace's start"),
        (["x,,1,ChatGPT,10,3,13,API log"], ":2: Timestamp is not a finite number (got 'x')"),
        (["5,,1,ChatGPT,10,3,13,API log", "6,,1,ChatGPT,10,3,13,API log,extra"], ":3: 9 fields where the header has 8"),
        (["5,,1,ChatGPT,10,3,13,API log", "", "7,,1,ChatGPT,ten,3,13,API log"], ":4: Request tokens is not a"),
    ],
)
def test_a_bad_burstgpt_row_is_named(tmp_path, rows, message):
    with pytest.raises(RidgelineError, match="BurstGPT_1.csv" + message.replace("(", r"\(").replace(")", r"\)")):
        load_trace(burst(tmp_path, rows))


@pytest.mark.parametrize(
    "line, message",
    [
        (
            '{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [1]}',
            ":2: 1 hash_ids for 600 input tokens; Mooncake has one per 512-token block, 2 here",
        ),
        (
            '{"timestamp": 0, "input_length": 6, "output_length": 2, "hash_ids": [-1]}',
            ":2: hash_ids must be a list of whole numbers >= 0",
        ),
        ('{"timestamp": 0, "input_length": 6, "output_length": 2, "hash_ids": "7"}', ":2: hash_ids must be a list"),
        (
            '{"timestamp": 0, "input_length": 6, "output_length": 0, "hash_ids": [7]}',
            ":2: output_length is below 1: output tokens < 1",
        ),
        (
            '{"timestamp": 0, "input_length": 6, "hash_ids": [7]}',
            ":2: output_length is not a finite number (got empty)",
        ),
        (
            '{"timestamp": NaN, "input_length": 6, "output_length": 1, "hash_ids": [7]}',
            ":2: timestamp is not a finite number",
        ),
        ('{"timestamp": 0, "input_length": 6, "output_length": 1, "hash_ids": [7]', ":2: not JSON"),
        ("[1, 2]", ":2: not a JSON object"),
    ],
)
def test_a_bad_mooncake_row_is_named(tmp_path, line, message):
    path = write(tmp_path, "m.jsonl", json.dumps(MOON[1]) + "\n" + line + "\n")
    with pytest.raises(
        RidgelineError, match="m.jsonl" + message.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")
    ):
        load_trace(path)


def test_too_many_requests_are_refused_before_the_rest_is_read(tmp_path, monkeypatch):
    monkeypatch.setattr(traces, "MAX_REQUESTS", 3)
    monkeypatch.setattr(traces, "CHUNK_ROWS", 2)
    with pytest.raises(RidgelineError, match="more than 3 requests selected; simulate a slice with --trace-window"):
        load_trace(burst(tmp_path, BURST_ROWS * 3))
    assert len(load_trace(burst(tmp_path, BURST_ROWS * 3), window=(0.0, 1.0))) == 3  # the rows at 5 s: at the limit


@pytest.mark.parametrize("text", ["10", "5,2", "-1,4", "0,nan", "a,b", "0,1,2"])
def test_bad_windows(text):
    with pytest.raises(RidgelineError, match="--trace-window takes START,END in seconds"):
        parse_window(text)


def test_prefix_spec():
    assert parse_prefix("shared:system=1024,fanout=8") == (1024, 8)
    for text in (
        "shared:system=1024",
        "system=1024,fanout=8",
        "shared:system=0,fanout=8",
        "shared:system=8,fanout=2,x=1",
    ):
        with pytest.raises(RidgelineError, match="--prefix takes shared:system=TOKENS,fanout=N"):
            parse_prefix(text)


def test_cli_window_and_log_type(tmp_path):
    out = tmp_path / "sim.json"
    args = ["simulate", "llama-3.2-1b", "-H", "a6000", "--trace", str(burst(tmp_path))]
    result = runner.invoke(
        app, [*args, "--trace-window", "0,100", "--trace-log-type", "Conversation log", "-f", "json", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(out.read_text())
    assert data["meta"]["trace"] == {
        "format": "burstgpt",
        "rows": 6,
        "requests": 2,
        "window_s": [0.0, 100.0],
        "log_type": "Conversation log",
        "failed_skipped": 1,
        "out_of_order_sorted": 1,
    }
    assert data["requests"]["prompt"] == [472, 417]
    table = runner.invoke(app, [*args, "--trace-window", "0,100"])
    assert (
        "trace (burstgpt): 3 requests of 6 rows; window 0-100 s; 1 failed requests (0 response tokens) skipped; 1 rows out of time order, sorted"
        in table.output
    )


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--trace-window", "9,3"], "--trace-window takes START,END"),
        (["--trace-log-type", "API log"], "--trace-log-type needs a BurstGPT trace"),
    ],
)
def test_cli_bad_selection_is_one_line(tmp_path, extra, message):
    path = write(tmp_path, "t.csv", "arrival_s,prompt_tokens,output_tokens\n0,10,2\n")
    result = runner.invoke(app, ["simulate", "llama-3.2-1b", "-H", "a6000", "--trace", str(path), *extra])
    assert result.exit_code == 2 and message in result.output
    assert "Traceback" not in result.output


def test_cli_window_needs_a_trace():
    result = runner.invoke(app, ["simulate", "llama-3.2-1b", "-H", "a6000", "--trace-window", "0,10"])
    assert result.exit_code == 2 and "select from a --trace" in result.output


def test_cli_mooncake_ids_drive_the_prefix_cache(tmp_path):
    """The three MOON requests share hash id 0 (their first 512 tokens): the second and
    third hit it (the third's prompt of 513 tokens has one whole block; the one token
    after it is computed); with --no-prefix-cache nothing hits, and without either the
    engine's default holds (vLLM V1's: on)."""
    out = tmp_path / "sim.json"
    args = ["simulate", "llama-3.2-1b", "-H", "a6000", "--trace", str(mooncake(tmp_path, MOON)), "-f", "json"]
    assert runner.invoke(app, [*args, "--prefix-cache", "-o", str(out)]).exit_code == 0
    data = json.loads(out.read_text())
    assert data["requests"]["prefix_hit_tokens"] == [0, 512, 512]
    assert data["summary"]["prefix_hit_tokens"] == 1024 and data["meta"]["trace"]["format"] == "mooncake"
    assert runner.invoke(app, [*args, "--no-prefix-cache", "-o", str(out)]).exit_code == 0
    assert json.loads(out.read_text())["summary"]["prefix_hit_tokens"] == 0
    assert runner.invoke(app, [*args, "-o", str(out)]).exit_code == 0
    assert json.loads(out.read_text())["summary"]["prefix_hit_tokens"] == 1024
