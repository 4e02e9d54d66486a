"""The package version, one place (``ridgeline.__version__``; the host cache and result files record it)."""

__version__ = "0.1.0"
