"""ridgeline: roofline performance analysis for large language model inference."""

from ridgeline.api import analyze, compare, frontier, max_batch, speculative, sweep
from ridgeline.engine.analyze import Analysis
from ridgeline.engine.deployment import Deployment
from ridgeline.engine.device import DeviceSpec
from ridgeline.engine.model import ModelConfig
from ridgeline.engine.workload import Settings, Workload
from ridgeline.errors import RidgelineError
from ridgeline.io.resolve import list_devices, list_models, load_device, load_model, resolve
from ridgeline.version import __version__ as __version__

__all__ = [
    "Analysis",
    "Deployment",
    "DeviceSpec",
    "ModelConfig",
    "RidgelineError",
    "Settings",
    "Workload",
    "analyze",
    "compare",
    "frontier",
    "list_devices",
    "list_models",
    "load_device",
    "load_model",
    "max_batch",
    "resolve",
    "speculative",
    "sweep",
]
