"""Every option of every command, declared once: one line each in the signature of
``options`` (typer reads it once: ``option_params``). A command names the options it takes,
in the order its help lists them (app.command). An option that means something else in one
command (another default or help) is a variant ``name__command``: its flag is the same."""

from __future__ import annotations

import dataclasses
import inspect
from functools import cache
from pathlib import Path
from typing import Annotated, get_args, get_type_hints

import typer

from ridgeline.engine.workload import Settings
from ridgeline.io.settings import DEPLOYMENT, SETTING_FIELDS
from ridgeline.io.traces import CHECK_OUTPUT_RANGE, CHECK_PROMPT_RANGE

Text = str | None  # a deployment option is text, so that sweep and compare take lists ("16,8,4")


# fmt: off
def options(
    w_bits: Annotated[Text, typer.Option(help="Weight bits: 16, 8, 4, 2, 1 (integers below 16).")] = None,
    a_bits: Annotated[Text, typer.Option(help="Activation bits: 16 or 8.")] = None,
    kv_bits: Annotated[Text, typer.Option(help="KV-cache bits: 16, 8, 4, 2, 1.")] = None,
    model: Annotated[str | None, typer.Argument(help="Catalog model name (see 'ridgeline models list').")] = None,
    config: Annotated[Path | None, typer.Option(help="A Hugging Face config.json instead of a catalog name.")] = None,
    hardware: Annotated[str, typer.Option("--hardware", "-H", help="Catalog device, 'host', or a device YAML file.")] = "a6000",
    batch: Annotated[int, typer.Option(help="Sequences per batch.")] = 1,
    seq_len: Annotated[int, typer.Option(help="Prompt length in tokens.")] = 512,
    generate: Annotated[int, typer.Option(help="Output tokens per sequence (0: no generation totals).")] = 0,
    dtype: Annotated[str | None, typer.Option(help="Weights, activations and KV cache type: fp32, bf16, fp16, fp8, int8, int4. Default: fp16, or bf16/fp32 on a device without fp16 matrix units (said in the output).")] = None,
    draft: Annotated[str | None, typer.Option(help="Draft model for speculative decoding.")] = None,
    draft_tokens: Annotated[int, typer.Option(help="Tokens the draft proposes per step (k).")] = 4,
    acceptance: Annotated[float, typer.Option(help="Probability each draft token is accepted (a).")] = 0.7,
    profile: Annotated[Path | None, typer.Option(help="Measured device profile YAML ('ridgeline calibrate' writes one; reports/profiles holds the committed ones): the calibrated roofline of the device it was measured on. Measuring commands default to the measured device's own.")] = None,
    transfer: Annotated[bool, typer.Option("--transfer", help="Apply --profile to another GPU of its architecture: its measured fractions on this device's datasheet roofs (labelled 'transferred'; it keeps how the profile was timed: an eager-timed one, as the H100's of 2026-11-23, prices eager execution only). Its measured error between the H100 and the H200: reports/RESULTS.md, 'Transfer between the GPUs'.")] = False,
    html: Annotated[Path | None, typer.Option(help="Also write the charts to one self-contained HTML file.")] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write to this file (atomically) instead of stdout.")] = None,
    batch__sweep: Annotated[str, typer.Option("--batch", help="Batch sizes, e.g. 1,2,4..256.")] = "1",
    seq_len__sweep: Annotated[str, typer.Option("--seq-len", help="Prompt lengths, e.g. 512,1024..32768.")] = "512",
    hardware__compare: Annotated[str, typer.Option("--hardware", "-H", help="Devices, comma-separated.")] = "a6000,h100-sxm",
    generate__compare: Annotated[int, typer.Option("--generate", help="Output tokens per sequence (0: no generation totals).")] = 128,
    seq_len__frontier: Annotated[int, typer.Option("--seq-len", help="Prompt length in tokens.")] = 1024,
    generate__frontier: Annotated[int, typer.Option("--generate", help="Output tokens per sequence (0: no generation totals).")] = 256,
    tpot_slo: Annotated[float | None, typer.Option(help="Largest acceptable TPOT, seconds.")] = None,
    ttft_slo: Annotated[float | None, typer.Option(help="Largest acceptable TTFT, seconds.")] = None,
    name: Annotated[str, typer.Argument(help="Catalog name, 'host', or a YAML file.")] = ...,
    refresh: Annotated[bool, typer.Option("--refresh", help="host: detect and measure again (the result is kept for later runs).")] = False,
    name__show: Annotated[str, typer.Argument(help="Catalog name or a config.json path.")] = ...,
    device: Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda when torch sees one).")] = None,
    batch__e2e: Annotated[list[int], typer.Option("--batch", help="Sequences per batch; repeat the option for several.")] = [1],  # noqa: B006
    prompt: Annotated[list[int], typer.Option(help="Prompt tokens; repeat the option for several.")] = [128],  # noqa: B006
    generate__e2e: Annotated[int, typer.Option("--generate", help="Output tokens: the prefill's token + N-1 decode steps.")] = 16,
    layers: Annotated[int | None, typer.Option(help="Keep only the first L decoder layers (prediction too).")] = None,
    dtype__e2e: Annotated[str, typer.Option("--dtype", help="fp32, bf16 or fp16 for weights, activations and KV cache.")] = "bf16",
    compile: Annotated[bool, typer.Option("--compile", help="Also measure under torch.compile (eager is always measured).")] = False,
    execution__e2e: Annotated[list[str] | None, typer.Option("--execution", help="eager, compiled or graph (CUDA graphs of the decode step); repeat for several (default: eager, and compiled with --compile).")] = None,
    repeats: Annotated[int, typer.Option(help="Timed generations per configuration (median kept).")] = 5,
    threads: Annotated[int | None, typer.Option(help="torch CPU threads (default: torch's).")] = None,
    hardware__e2e: Annotated[str, typer.Option("--hardware", "-H", help="Device for the spec prediction: 'host' or a catalog name.")] = "host",
    output__e2e: Annotated[Path | None, typer.Option("--output", "-o", help="Result JSON (default: <user data folder>/validation/e2e-<device>-<model>-<date>.json, rows of a configuration measured again replaced; with --repredict: ./<stem>-repredicted.json).")] = None,
    repredict: Annotated[Path | None, typer.Option(help="Measure nothing: recompute the predictions of this e2e result file into a new file.")] = None,
    quiet_wait: Annotated[float, typer.Option(help="CPU: before each timed run, wait up to this many seconds for other processes to go idle.")] = 0.0,
    prompt__decode: Annotated[int, typer.Option("--prompt", help="Cached tokens before the first decode step.")] = 512,
    steps: Annotated[int, typer.Option(help="Decode steps per pass.")] = 16,
    layers__decode: Annotated[int | None, typer.Option("--layers", help="Keep only the first L decoder layers.")] = None,
    dtype__decode: Annotated[str, typer.Option("--dtype", help="fp32, bf16 or fp16.")] = "bf16",
    ops: Annotated[bool, typer.Option("--ops", help="Also time each engine op (profiler ranges) beside its prediction.")] = False,
    threads__decode: Annotated[int | None, typer.Option("--threads", help="torch CPU threads (default: torch's); the calibrated profile is the one of this count.")] = None,
    device__calibrate: Annotated[str, typer.Option("--device", help="cpu or cuda.")] = "cpu",
    quick: Annotated[bool, typer.Option("--quick", help="Fewer shapes and repetitions (CI: a few minutes on 2 cores).")] = False,
    threads__calibrate: Annotated[int | None, typer.Option("--threads", help="torch CPU threads, fixed for the run (default: all cores this process may use).")] = None,
    output__calibrate: Annotated[Path | None, typer.Option("--output", "-o", help="Profile path (default: <user data folder>/profiles/<device>.yaml; with --refit: ./<stem>.refit.yaml); its calibration rows go beside it, .calibration.csv for .yaml.")] = None,
    refit: Annotated[Path | None, typer.Option(help="Measure nothing: fit this profile again from its stored calibration rows into a new file.")] = None,
    extend: Annotated[Path | None, typer.Option(help="Measure only the calibration cases this version has that this profile's rows lack, on the machine and in the state it was measured in (--check's test first), and fit it again from all its rows into -o NEW (default: ./<stem>.extended.yaml).")] = None,
    check: Annotated[bool, typer.Option("--check", help="Write nothing: measure the profile's own roofs again (about 20 s) and say whether this machine is still in the state they were measured in; exit 1 if one moved more than 10%.")] = False,
    quiet_wait__calibrate: Annotated[float, typer.Option("--quiet-wait", help="CPU: before each case, wait up to this many seconds for other processes to go idle.")] = 0.0,
    output_dir: Annotated[Path | None, typer.Option(help="Folder for the JSON/CSV/HTML (default: <user data folder>/validation; with --repredict: the current folder).")] = None,
    repredict__validate: Annotated[Path | None, typer.Option("--repredict", help="Measure nothing: predict this snapshot JSON again (with --profile or the profile it used) into <stem>-repredicted.*.")] = None,
    recorded_ceilings: Annotated[bool, typer.Option("--recorded-ceilings", help="With --repredict: predict again on the ceilings the snapshot recorded (what an engine change alone moves), not on a profile.")] = False,
    draw: Annotated[int | None, typer.Option(help="Measure a fresh held-out set drawn with this seed instead of the committed one: two catalog models, batch sizes and context lengths that calibration never uses (written as <stem>-draw<SEED>.*).")] = None,
    through: Annotated[str, typer.Option(help="kernels (default: the kernels called directly) or transformers: one decoder layer's attention and MLP modules as transformers builds them (random weights, its default attention), measured and predicted (written as <stem>-through-transformers.*).")] = "kernels",
    fit_intervals: Annotated[bool, typer.Option("--fit-intervals", help="Fit interval tables instead of measuring: with --profile, the profile's from its leave-one-model-out residuals; without, the spec pools of the committed snapshots. Writes -o NEW.")] = False,
    coverage: Annotated[bool, typer.Option("--coverage", help="Check instead of measuring how often --profile's intervals hold on data left out of their fit (-o NEW.json to keep it).")] = False,
    hardware__register: Annotated[str, typer.Option("--hardware", "-H", help="Catalog device, 'host', or a device YAML file.")] = "h200",
    sizes: Annotated[str, typer.Option(help="The run's sizes preset (kernels/gpu/plan.py): gpu, gpu-heldout, gpu-families, gpu-heldout2, or cpu-test.")] = "gpu",
    transfer__register: Annotated[bool, typer.Option("--transfer", help="The profile is another GPU's of the same architecture: its fractions on this GPU's datasheet roofs (for a GPU with no device-time profile of its own).")] = False,
    results: Annotated[list[Path], typer.Argument(help="A run's OUT/results.tar.gz, or the folder it unpacks to; several for stages run again later (a later file of the same name replaces an earlier).")] = ...,
    predictions: Annotated[Path, typer.Option(help="The registered predictions (reports/predictions/*.json).")] = ...,
    workload: Annotated[str, typer.Option(help="Poisson arrivals: poisson:rate=REQ_PER_S,prompt=TOKENS,output=TOKENS,n=REQUESTS[,seed=S].")] = "poisson:rate=20,prompt=512,output=256,n=10000",
    slo: Annotated[str, typer.Option("--slo", help="Latency targets, seconds: ttft=0.5,tpot=0.05 (either or both).")] = "ttft=0.5,tpot=0.05",
    devices: Annotated[str, typer.Option(help="Catalog devices to search, comma-separated.")] = "h100-sxm,h200,a100-80gb,mi300x",
    counts: Annotated[str, typer.Option(help="Devices per deployment, comma-separated; every tp x pp split of each.")] = "1,2,4,8",
    price: Annotated[str | None, typer.Option("--price", help="USD per GPU-hour overrides: h100-sxm=3.5,mi300x=2.9 (default: the shipped list).")] = None,
    executor: Annotated[str, typer.Option(help="Where simulations run: local (processes) or ray.")] = "local",
    address: Annotated[str | None, typer.Option(help="A Ray cluster's address (with --executor ray); default: a local one.")] = None,
    workers: Annotated[int | None, typer.Option(help="Worker processes (local) or CPUs (a local Ray); default: this machine's CPUs.")] = None,
    top: Annotated[int, typer.Option(help="Rows of the table of the cheapest deployments.")] = 10,
    output__plan: Annotated[Path | None, typer.Option("--output", "-o", help="Write every deployment, with the search's counts, as JSON.")] = None,
    replicas__plan: Annotated[str, typer.Option("--replicas", help="Replica counts R: each count also as R replicas of count/R devices, least-outstanding routed.")] = "1",
    pools: Annotated[str | None, typer.Option(help="Disaggregated P:D splits, comma-separated: P prefill + D decode servers of count/(P+D) each.")] = None,
    drafts: Annotated[str | None, typer.Option(help="Draft models to speculate with, NAME:K:ACCEPTANCE comma-separated (and none).")] = None,
    rate_search: Annotated[bool, typer.Option("--rate-search", help="Also find each simulated deployment's highest rate meeting the SLO at p99.")] = False,
    rate: Annotated[float, typer.Option(help="Poisson arrivals, requests per second (start of --search).")] = 1.0,
    requests: Annotated[int, typer.Option(help="Poisson requests to simulate.")] = 1000,
    prompt__simulate: Annotated[int, typer.Option("--prompt", help="Prompt tokens per Poisson request.")] = 512,
    output_tokens: Annotated[int, typer.Option(help="Output tokens per Poisson request.")] = 128,
    trace: Annotated[Path | None, typer.Option(help="CSV/JSONL trace: arrival_s, prompt_tokens, output_tokens; Azure's, BurstGPT's and Mooncake's load as they are (docs/traces.md).")] = None,
    time_scale: Annotated[float, typer.Option(help="Replay the trace this many times faster.")] = 1.0,
    trace_window: Annotated[str | None, typer.Option(help="START,END: only the trace's requests arriving in [START, END) seconds from its first request.")] = None,
    trace_log_type: Annotated[str | None, typer.Option(help="BurstGPT traces: only the rows of this Log Type, e.g. 'Conversation log'.")] = None,
    prefix: Annotated[str | None, typer.Option(help="shared:system=TOKENS,fanout=N: each N requests in a row share a system prompt of TOKENS tokens (block ids for --prefix-cache).")] = None,
    max_batch: Annotated[int, typer.Option(help="Sequences per step.")] = 256,
    token_budget: Annotated[int, typer.Option(help="Tokens per step (prefill chunks + decodes).")] = 2048,
    chunked_prefill: Annotated[bool, typer.Option("--chunked-prefill/--no-chunked-prefill", help="Split prompts to fit the token budget.")] = True,
    prefix_hit: Annotated[float, typer.Option(help="Fraction of each prompt found in the prefix cache.")] = 0.0,
    prefix_cache: Annotated[bool, typer.Option("--prefix-cache/--no-prefix-cache", help="Cache prompts' KV blocks by their ids (a Mooncake trace's hash_ids, or --prefix), LRU-evicted within the KV cache.")] = False,
    kv_blocks: Annotated[int | None, typer.Option(help="Paged KV blocks (default: what memory leaves).")] = None,
    admit_margin: Annotated[float, typer.Option(help="New prompts wait below this fraction of free KV blocks (transformers: 0.15).")] = 0.0,
    step_overhead: Annotated[float, typer.Option(help="Host seconds per step beyond the forward (measured: simulate-check --fit-overhead).")] = 0.0,
    request_overhead: Annotated[float, typer.Option(help="Host seconds per request in a step, on top of --step-overhead.")] = 0.0,
    host_overlap: Annotated[bool, typer.Option("--host-overlap", help="The host terms overlap the device's work (a GPU run eager): a step takes the longer of the forward and the host terms, not their sum.")] = False,
    batch_attention: Annotated[str, typer.Option(help="varlen: each sequence attends to its own keys (vLLM); masked: one attention over the whole step under a block-diagonal mask; gather: masked as transformers' sdpa path runs it (cache written and read back by index, GQA heads repeated).")] = "varlen",
    seed: Annotated[int, typer.Option(help="Seed of the Poisson arrivals.")] = 0,
    ttft_slo__simulate: Annotated[float | None, typer.Option("--ttft-slo", help="TTFT target, seconds.")] = None,
    tpot_slo__simulate: Annotated[float | None, typer.Option("--tpot-slo", help="TPOT target, seconds.")] = None,
    percentile: Annotated[float, typer.Option(help="Percentile the SLOs apply to.")] = 99.0,
    search: Annotated[bool, typer.Option("--search", help="Find the highest request rate meeting the SLOs.")] = False,
    timeline: Annotated[Path | None, typer.Option(help="Also write the step timeline (KV use, batch) as CSV.")] = None,
    scenario: Annotated[str | None, typer.Option(help="MLPerf Inference scenario for Llama 2 70B: server, interactive or offline (LoadGen's latency bounds, the data set's lengths; --requests samples).")] = None,
    instances: Annotated[int, typer.Option(help="With --scenario: copies of the deployment sharing the load.")] = 1,
    duration: Annotated[float | None, typer.Option(help="With --scenario server/interactive: seconds of arrivals per run (LoadGen's minimum, 600, by default).")] = None,
    replicas: Annotated[int, typer.Option(help="Copies of the server behind a router.")] = 1,
    route: Annotated[str, typer.Option(help="How the router picks a replica: round-robin, least-outstanding or prefix-affinity.")] = "round-robin",
    prefill_replicas: Annotated[int | None, typer.Option(help="Disaggregate: servers in the prefill pool (with --decode-replicas).")] = None,
    decode_replicas: Annotated[int | None, typer.Option(help="Disaggregate: servers in the decode pool.")] = None,
    prefill_hardware: Annotated[str | None, typer.Option(help="Device of the prefill pool (default --hardware).")] = None,
    decode_hardware: Annotated[str | None, typer.Option(help="Device of the decode pool (default --hardware).")] = None,
    kv_link: Annotated[str | None, typer.Option("--kv-link", help="KV cache link between the pools, GBPS,US (default 400,9.6: a ConnectX-7 port).")] = None,
    model__check: Annotated[str, typer.Argument(help="Catalog model (built with random weights).")] = "qwen2-0.5b",
    requests__check: Annotated[int, typer.Option("--requests", help="Requests in the Poisson trace.")] = 48,
    rate__check: Annotated[float, typer.Option("--rate", help="Requests per second.")] = 2.0,
    prompt_range: Annotated[tuple[int, int], typer.Option(help="Prompt tokens, uniform on MIN MAX.")] = CHECK_PROMPT_RANGE,
    output_range: Annotated[tuple[int, int], typer.Option(help="Output tokens, uniform on MIN MAX.")] = CHECK_OUTPUT_RANGE,
    repeats__check: Annotated[int, typer.Option("--repeats", help="Replays of the trace (per-request medians).")] = 3,
    seed__check: Annotated[int, typer.Option("--seed", help="Seed of the trace and the prompts.")] = 0,
    dtype__check: Annotated[str, typer.Option("--dtype", help="Model data type: bf16, or fp32 on a CPU without bf16 kernels (see 'calibrate').")] = "bf16",
    clock: Annotated[str | None, typer.Option(help="cpu: step transformers' server here on a clock of CPU seconds (immune to other processes); device (a GPU): the same, each step's wall seconds with the GPU synchronised; wall: its background thread in real time. Default: cpu, or device with --device cuda.")] = None,
    device__check: Annotated[str, typer.Option("--device", help="cpu, or cuda: transformers on the GPU, eager (no CUDA graphs), simulated in eager execution with the GPU's profile.")] = "cpu",
    overhead_from: Annotated[Path | None, typer.Option(help="Also simulate with the host terms fitted to this recorded run (another trace).")] = None,
    fit_overhead: Annotated[Path | None, typer.Option(help="Measure nothing: fit the host terms (seconds per step, per request) to this recorded run's steps and print them.")] = None,
    resimulate: Annotated[Path | None, typer.Option(help="Measure nothing: simulate this recorded run's trace again with today's engine and print the comparison.")] = None,
    host: Annotated[str, typer.Option(help="Interface to bind; the default keeps it on this machine.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")] = 8050,
    debug: Annotated[bool, typer.Option(help="Dash debug mode (reloader, error pop-ups).")] = False,
    waitress: Annotated[bool, typer.Option("--waitress", help="Serve with waitress, a production WSGI server, instead of Flask's development server.")] = False,
    threads__serve: Annotated[int, typer.Option("--threads", min=1, help="waitress: requests served at once.")] = 8,
):
    """The table of options: typer builds each from its line here (option_params)."""
# fmt: on


def settings_table():
    """The options that set a ``Settings`` field (all but the *_bits above), with the field's help
    (the dashboard's): a signature for typer to read, as ``options``'."""

    def table(**_): ...

    helps = {f.name: f.metadata["help"] for f in dataclasses.fields(Settings)}
    hint = lambda text: Annotated[Text, typer.Option(help=f"{text[0].upper()}{text[1:]}.")]  # noqa: E731
    field = lambda n: helps[SETTING_FIELDS.get(n, n)]  # noqa: E731
    line = lambda n: inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=hint(field(n)))  # noqa: E731
    table.__signature__ = inspect.Signature([line(n) for n in DEPLOYMENT if not n.endswith("_bits")])
    return table


@cache
def option_params() -> dict[str, typer.core.TyperOption | typer.core.TyperArgument]:
    """Each option as typer builds it, by name; a variant answers to its plain name."""
    params = {}
    for declared in (options, settings_table()):
        table = typer.Typer(add_completion=False)
        table.command()(declared)
        params |= {p.name: p for p in typer.main.get_command(table).params}
    for key, param in params.items():
        param.name = key.split("__")[0]
    return params


@cache
def path_options() -> frozenset[str]:
    """The options declared as paths: typer hands them over as Paths, or (0.27) as strings."""
    hints = get_type_hints(options)
    return frozenset(name.split("__")[0] for name, hint in hints.items() if Path in (hint, *get_args(hint)))


def params_of(names: str) -> list:
    """The options a command takes ('model config ... deployment'), in its help's order."""
    words = [w for name in names.split() for w in (DEPLOYMENT if name == "deployment" else [name])]
    return [option_params()[w] for w in words]
