"""Every option of the ``ridgeline`` commands, declared once as an ``Annotated`` alias (the
default sits in the command's signature), and the deployment options turned into Settings keywords."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from ridgeline.engine.workload import dtype_for_bits

# --- shared by the analysis commands (analyze, sweep, compare, frontier) and simulate ---------

ModelArg = Annotated[str | None, typer.Argument(help="Catalog model name (see 'ridgeline models list').")]
Config = Annotated[Path | None, typer.Option(help="A Hugging Face config.json instead of a catalog name.")]
Hardware = Annotated[str, typer.Option("--hardware", "-H", help="Catalog device, 'host', or a device YAML file.")]
Devices = Annotated[str, typer.Option("--hardware", "-H", help="Devices, comma-separated.")]
Batch = Annotated[int, typer.Option(help="Sequences per batch.")]
SeqLen = Annotated[int, typer.Option(help="Prompt length in tokens.")]
Generate = Annotated[int, typer.Option(help="Output tokens per sequence (0: no generation totals).")]
Dtype = Annotated[
    str | None,
    typer.Option(
        help="Weights, activations and KV cache type: fp32, bf16, fp16, fp8, int8, int4. "
        "Default: fp16, or bf16/fp32 on a device without fp16 matrix units (said in the output)."
    ),
]
Format = Annotated[str, typer.Option("--format", "-f", help="table, json or csv.")]
Output = Annotated[
    Path | None, typer.Option("--output", "-o", help="Write to this file (atomically) instead of stdout.")
]
Profile = Annotated[
    Path | None,
    typer.Option(
        help="Measured device profile YAML ('ridgeline calibrate' writes one; reports/profiles holds the committed ones): the calibrated roofline of the device it was measured on. Measuring commands default to the measured device's own."
    ),
]
Transfer = Annotated[
    bool,
    typer.Option(
        "--transfer",
        help="Apply --profile to another GPU of its architecture: its measured fractions on this device's datasheet roofs (labelled 'transferred'; it keeps how the profile was timed: an eager-timed one, as the H100's of 2026-11-23, prices eager execution only).",
    ),
]
TtftSlo = Annotated[float | None, typer.Option(help="Largest acceptable TTFT, seconds.")]
TpotSlo = Annotated[float | None, typer.Option(help="Largest acceptable TPOT, seconds.")]

# analyze
Draft = Annotated[str | None, typer.Option(help="Draft model for speculative decoding.")]
DraftTokens = Annotated[int, typer.Option(help="Tokens the draft proposes per step (k).")]
Acceptance = Annotated[float, typer.Option(help="Probability each draft token is accepted (a).")]
Html = Annotated[Path | None, typer.Option(help="Also write the charts to one self-contained HTML file.")]
# sweep
Batches = Annotated[str, typer.Option(help="Batch sizes, e.g. 1,2,4..256.")]
SeqLens = Annotated[str, typer.Option(help="Prompt lengths, e.g. 512,1024..32768.")]

# --- deployment settings (ridgeline.engine.workload.Settings): text, so that sweep and compare
# take lists ("16,8,4"); settings_keywords turns them into Settings keywords ------------------

WBits = Annotated[str | None, typer.Option(help="Weight bits: 16, 8, 4, 2, 1 (integers below 16).")]
ABits = Annotated[str | None, typer.Option(help="Activation bits: 16 or 8.")]
KvBits = Annotated[str | None, typer.Option(help="KV-cache bits: 16, 8, 4, 2, 1.")]
WDtype = Annotated[str | None, typer.Option(help="Weight type, e.g. fp8_e4m3, bf16, int4.")]
ADtype = Annotated[str | None, typer.Option(help="Activation type.")]
KvDtype = Annotated[str | None, typer.Option(help="KV-cache type.")]
GroupSize = Annotated[str | None, typer.Option(help="Quantisation group size (0: per channel).")]
Attention = Annotated[
    str | None,
    typer.Option(
        help="auto (sdpa-gqa on a CPU, eager on a GPU), eager, sdpa-repeat, sdpa-gqa, flash, flash-decoding or paged: docs/model.md, Attention settings."
    ),
]
KvBlock = Annotated[str | None, typer.Option(help="Tokens per KV block (paged).")]
Tp = Annotated[str | None, typer.Option(help="Tensor-parallel devices.")]
Pp = Annotated[str | None, typer.Option(help="Pipeline-parallel stages.")]
Ep = Annotated[str | None, typer.Option(help="Expert-parallel devices (MoE).")]
MicroBatches = Annotated[str | None, typer.Option(help="Pipeline micro-batches.")]
LinkBw = Annotated[str | None, typer.Option(help="Interconnect GB/s per direction (overrides the catalog).")]
LinkLatency = Annotated[str | None, typer.Option(help="Interconnect latency per hop, µs.")]
ZeroPoints = Annotated[
    str | None,
    typer.Option(help="Integer weights' zero points: fp16 or packed (AWQ/GPTQ, at the weight's width)."),
]
MemoryUtilization = Annotated[
    str | None,
    typer.Option(help="Fraction of device memory the runtime may use (vLLM's gpu_memory_utilization; default 0.9)."),
]
Execution = Annotated[
    str | None,
    typer.Option(
        help="graph, eager or compiled (auto: graph on a GPU, eager on a CPU); matters with a device-time profile."
    ),
]

# --- simulate ------------------------------------------------------------------------------

Rate = Annotated[float, typer.Option(help="Poisson arrivals, requests per second (start of --search).")]
Requests = Annotated[int, typer.Option(help="Poisson requests to simulate.")]
Prompt = Annotated[int, typer.Option(help="Prompt tokens per Poisson request.")]
OutputTokens = Annotated[int, typer.Option(help="Output tokens per Poisson request.")]
Trace = Annotated[
    Path | None,
    typer.Option(
        help="CSV/JSONL trace: arrival_s, prompt_tokens, output_tokens; Azure's, BurstGPT's and Mooncake's load as they are (docs/traces.md)."
    ),
]
TimeScale = Annotated[float, typer.Option(help="Replay the trace this many times faster.")]
TraceWindow = Annotated[
    str | None,
    typer.Option(help="START,END: only the trace's requests arriving in [START, END) seconds from its first request."),
]
TraceLogType = Annotated[
    str | None, typer.Option(help="BurstGPT traces: only the rows of this Log Type, e.g. 'Conversation log'.")
]
Prefix = Annotated[
    str | None,
    typer.Option(
        help="shared:system=TOKENS,fanout=N: each N requests in a row share a system prompt of TOKENS tokens (block ids for --prefix-cache)."
    ),
]
PrefixCache = Annotated[
    bool,
    typer.Option(
        "--prefix-cache/--no-prefix-cache",
        help="Cache prompts' KV blocks by their ids (a Mooncake trace's hash_ids, or --prefix), LRU-evicted within the KV cache.",
    ),
]
MaxBatch = Annotated[int, typer.Option(help="Sequences per step.")]
TokenBudget = Annotated[int, typer.Option(help="Tokens per step (prefill chunks + decodes).")]
ChunkedPrefill = Annotated[
    bool, typer.Option("--chunked-prefill/--no-chunked-prefill", help="Split prompts to fit the token budget.")
]
PrefixHit = Annotated[float, typer.Option(help="Fraction of each prompt found in the prefix cache.")]
KvBlocks = Annotated[int | None, typer.Option(help="Paged KV blocks (default: what memory leaves).")]
AdmitMargin = Annotated[
    float, typer.Option(help="New prompts wait below this fraction of free KV blocks (transformers: 0.15).")
]
StepOverhead = Annotated[
    float,
    typer.Option(help="Host seconds per step beyond the forward (measured: simulate-check --fit-overhead)."),
]
RequestOverhead = Annotated[float, typer.Option(help="Host seconds per request in a step, on top of --step-overhead.")]
HostOverlap = Annotated[
    bool,
    typer.Option(
        "--host-overlap",
        help="The host terms overlap the device's work (a GPU run eager): a step takes the longer of the forward and the host terms, not their sum.",
    ),
]
BatchAttention = Annotated[
    str,
    typer.Option(
        help="varlen: each sequence attends to its own keys (vLLM); masked: one attention over the whole step under a block-diagonal mask; gather: masked as transformers' sdpa path runs it (cache written and read back by index, GQA heads repeated)."
    ),
]
Seed = Annotated[int, typer.Option(help="Seed of the Poisson arrivals.")]
TtftTarget = Annotated[float | None, typer.Option("--ttft-slo", help="TTFT target, seconds.")]
TpotTarget = Annotated[float | None, typer.Option("--tpot-slo", help="TPOT target, seconds.")]
Percentile = Annotated[float, typer.Option(help="Percentile the SLOs apply to.")]
Search = Annotated[bool, typer.Option("--search", help="Find the highest request rate meeting the SLOs.")]
Replicas = Annotated[int, typer.Option(help="Copies of the server behind a router.")]
Route = Annotated[
    str, typer.Option(help="How the router picks a replica: round-robin, least-outstanding or prefix-affinity.")
]
PrefillReplicas = Annotated[
    int | None, typer.Option(help="Disaggregate: servers in the prefill pool (with --decode-replicas).")
]
DecodeReplicas = Annotated[int | None, typer.Option(help="Disaggregate: servers in the decode pool.")]
PrefillHardware = Annotated[str | None, typer.Option(help="Device of the prefill pool (default --hardware).")]
DecodeHardware = Annotated[str | None, typer.Option(help="Device of the decode pool (default --hardware).")]
KvLinkOption = Annotated[
    str | None,
    typer.Option("--kv-link", help="KV cache link between the pools, GBPS,US (default 400,9.6: a ConnectX-7 port)."),
]
Timeline = Annotated[Path | None, typer.Option(help="Also write the step timeline (KV use, batch) as CSV.")]
Scenario = Annotated[
    str | None,
    typer.Option(
        help="MLPerf Inference scenario for Llama 2 70B: server, interactive or offline (LoadGen's latency bounds, the data set's lengths; --requests samples)."
    ),
]
Instances = Annotated[int, typer.Option(help="With --scenario: copies of the deployment sharing the load.")]
Duration = Annotated[
    float | None,
    typer.Option(
        help="With --scenario server/interactive: seconds of arrivals per run (LoadGen's minimum, 600, by default)."
    ),
]

# --- simulate-check ------------------------------------------------------------------------

CheckModel = Annotated[str, typer.Argument(help="Catalog model (built with random weights).")]
Layers = Annotated[int | None, typer.Option(help="Keep only the first L decoder layers.")]
CheckRequests = Annotated[int, typer.Option(help="Requests in the Poisson trace.")]
CheckRate = Annotated[float, typer.Option(help="Requests per second.")]
PromptRange = Annotated[tuple[int, int], typer.Option(help="Prompt tokens, uniform on MIN MAX.")]
OutputRange = Annotated[tuple[int, int], typer.Option(help="Output tokens, uniform on MIN MAX.")]
CheckRepeats = Annotated[int, typer.Option(help="Replays of the trace (per-request medians).")]
CheckSeed = Annotated[int, typer.Option(help="Seed of the trace and the prompts.")]
CheckDtype = Annotated[
    str, typer.Option(help="Model data type: bf16, or fp32 on a CPU without bf16 kernels (see 'calibrate').")
]
Clock = Annotated[
    str | None,
    typer.Option(
        help="cpu: step transformers' server here on a clock of CPU seconds (immune to other processes); device (a GPU): the same, each step's wall seconds with the GPU synchronised; wall: its background thread in real time. Default: cpu, or device with --device cuda."
    ),
]
CheckDevice = Annotated[
    str,
    typer.Option(
        help="cpu, or cuda: transformers on the GPU, eager (no CUDA graphs), simulated in eager execution with the GPU's profile."
    ),
]
OverheadFrom = Annotated[
    Path | None,
    typer.Option(help="Also simulate with the host terms fitted to this recorded run (another trace)."),
]
FitOverhead = Annotated[
    Path | None,
    typer.Option(
        help="Measure nothing: fit the host terms (seconds per step, per request) to this recorded run's steps and print them."
    ),
]
Resimulate = Annotated[
    Path | None,
    typer.Option(
        help="Measure nothing: simulate this recorded run's trace again with today's engine and print the comparison."
    ),
]

# --- serve ---------------------------------------------------------------------------------

Host = Annotated[str, typer.Option(help="Interface to bind; the default keeps it on this machine.")]
Port = Annotated[int, typer.Option(min=1, max=65535, help="TCP port.")]
Debug = Annotated[bool, typer.Option(help="Dash debug mode (reloader, error pop-ups).")]
Waitress = Annotated[
    bool,
    typer.Option(
        "--waitress", help="Serve with waitress, a production WSGI server, instead of Flask's development server."
    ),
]
ServeThreads = Annotated[int, typer.Option(min=1, help="waitress: requests served at once.")]

# --- catalogs ------------------------------------------------------------------------------

DeviceName = Annotated[str, typer.Argument(help="Catalog name, 'host', or a YAML file.")]
Refresh = Annotated[
    bool, typer.Option("--refresh", help="host: detect and measure again (the result is kept for later runs).")
]
ModelName = Annotated[str, typer.Argument(help="Catalog name or a config.json path.")]

# --- calibrate, validate -------------------------------------------------------------------

MeasureDevice = Annotated[str, typer.Option(help="cpu or cuda.")]
Quick = Annotated[bool, typer.Option("--quick", help="Fewer shapes and repetitions (CI: a few minutes on 2 cores).")]
Threads = Annotated[
    int | None, typer.Option(help="torch CPU threads, fixed for the run (default: all cores this process may use).")
]
QuietWait = Annotated[
    float, typer.Option(help="CPU: before each case, wait up to this many seconds for other processes to go idle.")
]
ProfileOutput = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Profile path (default: <user data folder>/profiles/<device>.yaml; with --refit: ./<stem>.refit.yaml); its calibration rows go beside it, .calibration.csv for .yaml.",
    ),
]
Refit = Annotated[
    Path | None,
    typer.Option(help="Measure nothing: fit this profile again from its stored calibration rows into a new file."),
]
Check = Annotated[
    bool,
    typer.Option(
        "--check",
        help="Write nothing: measure the profile's own roofs again (about 20 s) and say whether this machine is still in the state they were measured in; exit 1 if one moved more than 10%.",
    ),
]
OutputDir = Annotated[
    Path | None,
    typer.Option(
        help="Folder for the JSON/CSV/HTML (default: <user data folder>/validation; with --repredict: the current folder)."
    ),
]
Repredict = Annotated[
    Path | None,
    typer.Option(
        help="Measure nothing: predict this snapshot JSON again (with --profile or the profile it used) into <stem>-repredicted.*."
    ),
]
DrawSeed = Annotated[
    int | None,
    typer.Option(
        help="Measure a fresh held-out set drawn with this seed instead of the committed one: two catalog models, batch sizes and context lengths that calibration never uses (written as <stem>-draw<SEED>.*)."
    ),
]

# --- e2e, decode-profile -------------------------------------------------------------------

TorchDevice = Annotated[str | None, typer.Option(help="cpu or cuda (default: cuda when torch sees one).")]
E2eBatches = Annotated[list[int], typer.Option(help="Sequences per batch; repeat the option for several.")]
E2ePrompts = Annotated[list[int], typer.Option(help="Prompt tokens; repeat the option for several.")]
E2eGenerate = Annotated[int, typer.Option(help="Output tokens: the prefill's token + N-1 decode steps.")]
E2eLayers = Annotated[int | None, typer.Option(help="Keep only the first L decoder layers (prediction too).")]
E2eDtype = Annotated[str, typer.Option(help="fp32, bf16 or fp16 for weights, activations and KV cache.")]
Compile = Annotated[
    bool, typer.Option("--compile", help="Also measure under torch.compile (eager is always measured).")
]
Executions = Annotated[
    list[str] | None,
    typer.Option(
        help="eager, compiled or graph (CUDA graphs of the decode step); repeat for several (default: eager, and compiled with --compile)."
    ),
]
E2eRepeats = Annotated[int, typer.Option(help="Timed generations per configuration (median kept).")]
E2eThreads = Annotated[int | None, typer.Option(help="torch CPU threads (default: torch's).")]
E2eHardware = Annotated[
    str, typer.Option("--hardware", "-H", help="Device for the spec prediction: 'host' or a catalog name.")
]
E2eOutput = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        help="Result JSON (default: <user data folder>/validation/e2e-<device>-<model>-<date>.json, rows of a configuration measured again replaced; with --repredict: ./<stem>-repredicted.json).",
    ),
]
E2eRepredict = Annotated[
    Path | None,
    typer.Option(help="Measure nothing: recompute the predictions of this e2e result file into a new file."),
]
E2eQuietWait = Annotated[
    float,
    typer.Option(help="CPU: before each timed run, wait up to this many seconds for other processes to go idle."),
]
CachedPrompt = Annotated[int, typer.Option(help="Cached tokens before the first decode step.")]
Steps = Annotated[int, typer.Option(help="Decode steps per pass.")]
ProfileDtype = Annotated[str, typer.Option(help="fp32, bf16 or fp16.")]
Ops = Annotated[bool, typer.Option("--ops", help="Also time each engine op (profiler ranges) beside its prediction.")]
ProfileThreads = Annotated[
    int | None,
    typer.Option(help="torch CPU threads (default: torch's); the calibrated profile is the one of this count."),
]

# --- predictions ---------------------------------------------------------------------------

Sizes = Annotated[str, typer.Option(help="The run's sizes preset (kernels/gpu/plan.py): gpu, or cpu-test.")]
RegisterTransfer = Annotated[
    bool,
    typer.Option(
        "--transfer",
        help="The profile is another GPU's of the same architecture: its fractions on this GPU's datasheet roofs (for a GPU with no device-time profile of its own).",
    ),
]
Results = Annotated[
    list[Path],
    typer.Argument(
        help="A run's OUT/results.tar.gz, or the folder it unpacks to; several for stages run again later (a later file of the same name replaces an earlier)."
    ),
]
Predictions = Annotated[Path, typer.Option(help="The registered predictions (reports/predictions/*.json).")]

# option -> the Settings field it sets, where the names differ (*_bits give a width -> a dtype)
SETTING_FIELDS = {
    "w_bits": "w_dtype",
    "a_bits": "a_dtype",
    "kv_bits": "kv_dtype",
    "link_bw": "link_bw_gb_s",
    "link_latency": "link_latency_us",
}
NUMBERS = {"link_bw": float, "link_latency": float, "memory_utilization": float}
INTEGERS = ("group_size", "kv_block", "tp", "pp", "ep", "micro_batches")
DEPLOYMENT = (
    *("w_bits", "a_bits", "kv_bits", "w_dtype", "a_dtype", "kv_dtype", "group_size", "attention", "kv_block"),
    *("tp", "pp", "ep", "micro_batches", "link_bw", "link_latency", "zero_points", "memory_utilization", "execution"),
)


MAX_LIST_VALUES = 100_000  # values one list option may expand to


def parse_values(text: str, cast=int) -> list:
    """'1,2,4..256' -> 1 2 4 8 ... 256 (geometric when the last two values given double or
    multiply evenly, else arithmetic); '16,8,4' -> the values as given."""
    parts = [p.strip() for p in str(text).split(",") if p.strip()]
    try:
        if parts and ".." in parts[-1]:
            last, stop = parts[-1].split("..")
            given = [cast(p) for p in parts[:-1]] + [cast(last)]
            stop = cast(stop)
            if len(given) < 2:
                raise ValueError
            a, b = given[-2], given[-1]
            if not a < b <= stop:
                raise typer.BadParameter(
                    f"the range '{text}' does not rise to its end: its last two values must increase "
                    f"and the end be at least the last, e.g. 1,2,4..256"
                )
            geometric = a > 0 and b % a == 0 and b // a >= 2 if cast is int else False
            values = list(given)
            while True:
                nxt = values[-1] * (b // a) if geometric else values[-1] + (b - a)
                if nxt > stop:
                    return values
                if len(values) >= MAX_LIST_VALUES:
                    raise typer.BadParameter(
                        f"the range '{text}' gives more than {MAX_LIST_VALUES:,} values; use a coarser step"
                    )
                values.append(nxt)
        if not parts:
            raise ValueError
        return [cast(p) for p in parts]
    except (ValueError, ZeroDivisionError):
        raise typer.BadParameter(f"cannot read the list '{text}': write values like 1,2,4..256") from None


def setting_lists(params: dict[str, Any], allow_lists: bool = True) -> dict[str, list]:
    """A command's parameters -> {Settings field: [values]} for each deployment option given
    (one value each unless lists are allowed)."""
    out: dict[str, list] = {}
    for name in DEPLOYMENT:
        text, field, option = params.get(name), SETTING_FIELDS.get(name, name), f"--{name.replace('_', '-')}"
        if text is None:
            continue
        if field in out:
            raise typer.BadParameter(f"give {option} or its *-dtype/*-bits twin, not both")
        cast = int if name in INTEGERS or name.endswith("_bits") else NUMBERS.get(name, str)
        values = parse_values(text, cast) if cast is not str else [v.strip() for v in str(text).split(",")]
        if name.endswith("_bits"):
            values = [dtype_for_bits(v, name.split("_")[0]) for v in values]
        if len(values) > 1 and not allow_lists:
            raise typer.BadParameter(f"{option} takes one value here; use 'ridgeline sweep' for lists")
        out[field] = values
    return out


def settings_keywords(params: dict[str, Any]) -> dict[str, Any]:
    """A command's parameters -> the Settings keywords its deployment options set (one value each)."""
    return {field: values[0] for field, values in setting_lists(params, allow_lists=False).items()}


FitIntervals = Annotated[
    bool,
    typer.Option(
        "--fit-intervals",
        help="Fit interval tables instead of measuring: with --profile, the profile's from its "
        "leave-one-model-out residuals; without, the spec pools of the committed snapshots. Writes -o NEW.",
    ),
]
Coverage = Annotated[
    bool,
    typer.Option(
        "--coverage",
        help="Check instead of measuring how often --profile's intervals hold on data left out of their fit (-o NEW.json to keep it).",
    ),
]
