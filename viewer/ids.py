"""Component ids, in one place. Callbacks and layout import these; nothing builds ids by hand."""

from __future__ import annotations

URL = "url"  # dcc.Location: pathname = page, search = every setting
TABS = "page-tabs"  # the page navigation
UPLOADS = "uploads"  # dcc.Store (session): uploaded configs and device specs

# Every control whose value lives in the URL has the id {"type": STATE, "key": <state key>}.
STATE = "state"


def state(key: str) -> dict[str, str]:
    """The id of the control that holds the URL state ``key``."""
    return {"type": STATE, "key": key}


NOT_FOUND = "not-found"  # "no such page", listing the pages
SIDEBAR = "sidebar"  # the workload and deployment controls (hidden on Validation)
URL_ERROR = "url-error"  # what the URL held that was not understood

# uploads
MODEL_UPLOAD = "model-upload"
DEVICE_UPLOAD = "device-upload"
UPLOAD_ERROR = "upload-error"

# pages: the shown one's components, built when the pathname changes, in one container
PAGES = ("analyze", "layer", "sweep", "compare", "validation", "serving")
PAGE = "page"  # the container


def page(name: str) -> str:
    """The shown page's own box (inside ``PAGE``)."""
    return f"page-{name}"


# analyze
ANALYZE_ERROR = "analyze-error"
CARDS = "cards"
ROOFLINE = "roofline"
TIME_BREAKDOWN = "time-breakdown"
MEMORY = "memory"
OP_TABLE = "op-table"
ANALYZE_TITLE = "analyze-title"

# layer view
LAYER_ERROR = "layer-error"
LAYER_GRAPH = "layer-graph"
LAYER_DETAILS = "layer-details"
LAYER_ROOFLINE = "layer-roofline"

# sweep
SWEEP_ERROR = "sweep-error"
SWEEP_GRAPH = "sweep-graph"

# compare
COMPARE_ERROR = "compare-error"
COMPARE_GRAPH = "compare-graph"
COMPARE_TABLE = "compare-table"

# validation
VALIDATION_MESSAGE = "validation-message"
VALIDATION_SCATTER = "validation-scatter"
VALIDATION_ERRORS = "validation-errors"
VALIDATION_ROOFS = "validation-roofs"
VALIDATION_WATERFALL = "validation-waterfall"  # measured minus spec, attributed (one run)
VALIDATION_WATERFALL_RUN = "validation-waterfall-run"  # which run's waterfall


def card(key: str) -> str:
    """The value text of one summary card (ttft, tpot, throughput, peak, fits)."""
    return f"card-{key}"


# serving
SERVING_ERROR = "serving-error"
SERVING_SUMMARY = "serving-summary"
SERVING_LATENCY = "serving-latency"
SERVING_KV = "serving-kv"

# serving: the Plan section
PLAN_ERROR = "plan-error"
PLAN_SUMMARY = "plan-summary"
PLAN_GRAPH = "plan-graph"
