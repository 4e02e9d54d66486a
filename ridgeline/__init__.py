"""ridgeline: roofline performance analysis for large language model inference."""
from .analyze import Analysis, analyze, sweep
from .errors import RidgelineError
from .hardware import DeviceSpec, list_devices, load_device
from .model import ModelConfig, list_models, load_model
from .resolve import Deployment, resolve
from .serving import compare, frontier, max_batch, speculative
from .workload import Settings, Workload

__version__ = "0.1.0"
__all__ = ["Analysis", "Deployment", "DeviceSpec", "ModelConfig", "RidgelineError", "Settings", "Workload",
           "analyze", "compare", "frontier", "list_devices", "list_models", "load_device",
           "load_model", "max_batch", "resolve", "speculative", "sweep"]
