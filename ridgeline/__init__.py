"""ridgeline: roofline performance analysis for large language model inference."""
from .analyze import Analysis, analyze, sweep
from .errors import RidgelineError
from .hardware import DeviceSpec, list_devices, load_device
from .model import ModelConfig, list_models, load_model
from .workload import Settings, Workload

__version__ = "0.1.0"
__all__ = ["Analysis", "DeviceSpec", "ModelConfig", "RidgelineError", "Settings", "Workload",
           "analyze", "list_devices", "list_models", "load_device", "load_model", "sweep"]
