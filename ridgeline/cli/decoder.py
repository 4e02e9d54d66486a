"""e2e and decode-profile: a real decoder (random weights) measured against the predictions
(kernels/commands.py runs each and declares its options; it needs torch, imported when it runs)."""

from kernels import commands
from ridgeline.cli.app import app, delegate

delegate(app, "e2e", commands.e2e, "Run a real decoder (random weights) and compare measured TTFT/TPOT with the predictions.")  # fmt: skip
delegate(app, "decode-profile", commands.decode_profile, "Split an eager decode step into host dispatch and device work (is it host-bound?).")  # fmt: skip
