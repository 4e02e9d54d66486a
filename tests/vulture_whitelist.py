"""Names vulture reports as unused that are used, each with why (read by tests/test_hygiene.py:
`vulture ridgeline kernels viewer tests .ci tests/vulture_whitelist.py`).
This file is never imported."""
# ruff: noqa: B018, F821

# CLI commands registered by typer's decorators (`@hardware_app.command("list")` etc.)
hardware_list, hardware_show, models_list, models_show  # ridgeline/cli/catalog.py

# the option table's lines (ridgeline/cli/options.py, options): typer reads the signature;
# a command reads them by their plain name (values(ctx)["w_bits"]; a variant name__command by its plain name)
w_bits, a_bits, kv_bits
batch__sweep, seq_len__sweep, hardware__compare
name__show
model__check
threads__serve
_.__signature__  # cli/options.py: typer reads the settings table's signature (inspect.signature)
_.list_commands, _.format_commands  # cli/app.py: OneLineErrors overrides the group's own, which click calls
standalone_mode  # cli/app.py: click main() keyword, taken so it is not passed on (always False)

# Public methods of DeviceSpec (exported by `import ridgeline`) for users' scripts
_.matrix_peak_for  # ridgeline/engine/device.py

# Scheduler policies, reached through the registry (@register("name"))
Sarathi, StaticFCFS, TransformersFIFO, GuaranteedNoEvict, MaxUtilization  # ridgeline/serving/policies/

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
