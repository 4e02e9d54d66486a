"""The viewer's commands, with dash imported only when they run (a missing extra is one line):
ridgeline serve (the dashboard, on Flask's server or waitress) and analyze --html (one
analysis's charts in a file)."""

from __future__ import annotations

from ridgeline.errors import InvalidOptionError, MissingDependencyError, RidgelineError


def run_dashboard(host: str, port: int, debug: bool, waitress: bool, threads: int, echo) -> None:
    """Build the dashboard and serve it until stopped (needs the viewer extra); ``echo`` prints its URL."""
    if waitress and debug:
        raise InvalidOptionError("--debug runs Flask's development server; drop --debug or --waitress")
    try:
        from viewer.app import create_app
    except ImportError as err:
        raise MissingDependencyError("dash, plotly and dash-cytoscape", "viewer") from err
    if waitress:
        try:
            from waitress import serve as wsgi_serve
        except ImportError as err:
            raise MissingDependencyError("waitress", "viewer") from err
    dashboard = create_app()
    shown = f"[{host}]" if ":" in host else host
    echo(f"ridgeline dashboard on http://{shown}:{port}/ (Ctrl+C stops it)")
    try:
        if waitress:
            wsgi_serve(dashboard.server, host=host, port=port, threads=threads)
        else:
            # no version check: it calls plotly.com, and the dashboard works offline
            dashboard.run(host=host, port=port, debug=debug, dev_tools_disable_version_check=True)
    except OSError as err:
        raise RidgelineError(f"cannot listen on {host}:{port} ({err.strerror or err}); pick another --port") from None


def write_html(result, path, echo) -> None:
    """The dashboard's charts for one analysis, in one self-contained file; ``echo`` says where."""
    try:
        from viewer.export import write_html as export
    except ImportError as err:
        raise MissingDependencyError("dash and plotly", "viewer") from err
    export(result, path)
    echo(f"wrote {path}")
