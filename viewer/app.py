"""``create_app()``: the Dash dashboard that ``ridgeline serve`` runs."""

from __future__ import annotations

from pathlib import Path

from dash import Dash

ASSETS = Path(__file__).resolve().parent / "assets"


def create_app() -> Dash:
    from viewer import callbacks, plan, serving
    from viewer.layout import every_page

    app = Dash(
        __name__, title="ridgeline", assets_folder=str(ASSETS), suppress_callback_exceptions=False, update_title=None
    )
    app.layout = callbacks.first_layout
    app.validation_layout = every_page()
    callbacks.register(app)
    serving.register(app)
    plan.register(app)
    return app


def run(host: str = "127.0.0.1", port: int = 8050, debug: bool = False) -> None:
    create_app().run(host=host, port=port, debug=debug, dev_tools_disable_version_check=True)
