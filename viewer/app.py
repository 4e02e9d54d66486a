"""``create_app()``: the Dash dashboard that ``ridgeline serve`` runs."""

from __future__ import annotations

from pathlib import Path

from dash import Dash

ASSETS = Path(__file__).resolve().parent / "assets"
# plotly.js read while the layout's request is answered, not once the graphs mount (the URL
# the graphs would load it from: they find it loaded)
PLOTLY_JS = "/_dash-component-suites/plotly/package_data/plotly.min.js"


def create_app() -> Dash:
    from viewer import callbacks, plan, serving
    from viewer.layout import build_layout, every_page

    app = Dash(
        __name__,
        title="ridgeline",
        assets_folder=str(ASSETS),
        suppress_callback_exceptions=False,
        update_title=None,
        external_scripts=[{"src": PLOTLY_JS, "defer": "defer"}],
    )
    app.layout = build_layout
    app.validation_layout = every_page()
    callbacks.register(app)
    serving.register(app)
    plan.register(app)
    return app


def run(host: str = "127.0.0.1", port: int = 8050, debug: bool = False) -> None:
    create_app().run(host=host, port=port, debug=debug, dev_tools_disable_version_check=True)
