"""Names vulture reports as unused that are used, each with why (read by tests/test_hygiene.py:
`vulture ridgeline kernels viewer tests .ci tests/vulture_whitelist.py`).
This file is never imported."""
# ruff: noqa: B018, F821

# CLI commands registered by typer's decorators (`@hardware_app.command("list")` etc.)
hardware_list, hardware_show, models_list, models_show  # ridgeline/cli/catalog.py
decode_profile  # kernels/cli.py

# the option table's lines (ridgeline/cli/options.py, options): typer reads the signature;
# a command reads them by their plain name as text (values(ctx)["prompt_range"], setting_lists)
w_bits, a_bits, kv_bits, step_overhead, request_overhead, prompt_range, output_range
prefill_replicas, decode_replicas, prefill_hardware, decode_hardware
batch__sweep, seq_len__sweep, hardware__compare, generate__compare, seq_len__frontier, generate__frontier
name__show, batch__e2e, generate__e2e, dtype__e2e, execution__e2e, hardware__e2e, output__e2e, prompt__decode
layers__decode, dtype__decode, threads__decode, device__calibrate, threads__calibrate, output__calibrate
quiet_wait__calibrate, repredict__validate, hardware__register, transfer__register, output__plan, replicas__plan
prompt__simulate, ttft_slo__simulate, tpot_slo__simulate, model__check, requests__check, rate__check
repeats__check, seed__check, dtype__check, device__check, threads__serve, duration
_.__signature__  # cli/options.py: typer reads the settings table's signature (inspect.signature)
standalone_mode  # cli/app.py: click main() keyword, taken so it is not passed on (always False)

# Public methods of DeviceSpec (exported by `import ridgeline`) for users' scripts
_.matrix_peak_for, _.vector_peak_for  # ridgeline/engine/device.py

# Dataclass fields read through dataclasses.asdict / the op table's columns
_.comm_bytes, _.comm_hops  # ridgeline/engine/ops.py (Op)

# Scheduler policies, reached through the registry (@register("name"))
Sarathi, StaticFCFS, TransformersFIFO, GuaranteedNoEvict, PrefillFirst, MaxUtilization  # ridgeline/serving/policies/

# Attributes set on other libraries' objects
_.mtime  # kernels/gpu/run.py: tarfile.TarInfo
_.batch_processor  # kernels/servecheck/cb_server.py: transformers' continuous-batching manager
_.binary_location  # viewer/screenshots.py: selenium's ChromeOptions

# Dash callbacks, registered by @callback
_upload  # viewer/callbacks.py

# pytest: autouse fixtures, fixtures named by usefixtures, module marks, the browser test's import check
user_folders, elsewhere, no_machine  # tests/conftest.py, tests/test_measure_nothing.py
zen4_host  # tests/test_intervals.py
pytestmark, selenium  # tests/test_viewer_app.py, tests/test_viewer_browser.py
out_dtype  # tests/test_viewer_app.py: a Settings-like field the test adds to see it appear

# read by transformers' eager_attention_forward from the module it is given
num_key_value_groups  # tests/test_eager_attention.py

# Module attribute hooks Python calls itself (PEP 562): import ridgeline loads its public names on first use
__getattr__, __dir__  # ridgeline/__init__.py
