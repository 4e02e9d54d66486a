"""ridgeline: roofline performance analysis for large language model inference."""

from ridgeline.api import compare, frontier, max_batch, speculative
from ridgeline.engine.analyze import Analysis, analyze, sweep
from ridgeline.engine.model import ModelConfig, list_models, load_model
from ridgeline.engine.workload import Settings, Workload
from ridgeline.errors import RidgelineError
from ridgeline.io.hardware import DeviceSpec, list_devices, load_device
from ridgeline.io.resolve import Deployment, resolve

__version__ = "0.1.0"
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
