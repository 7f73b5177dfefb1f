"""The console's HTML: the index of runs (``/``) and the live page of one run (``/runs/<id>``).

Both are static files from ``static/`` (vanilla JS, no build step) that read everything
from the API; this module serves them and renders the few server-side message pages
(unknown run, token needed) in the console's style.
"""

from __future__ import annotations

import html
from pathlib import Path
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from schemas import UserError
from workspace import Workspace

__all__ = ["STATIC", "index_page", "message_page", "run_page"]

STATIC = Path(__file__).parent / "static"


def message_page(title: str, body_html: str) -> str:
    """A small page in the console's style; ``body_html`` is trusted markup."""
    return (
        "<!doctype html><html lang=en><head><meta charset=utf-8>"
        f"<title>{html.escape(title)} - gepa-runtime</title>"
        '<meta name=viewport content="width=device-width, initial-scale=1">'
        '<link rel=stylesheet href="/static/console.css"></head><body>'
        '<header class=topbar><a class=brand href="/">gepa-runtime <span>console</span></a></header>'
        f'<main class="message"><h1>{html.escape(title)}</h1>{body_html}</main></body></html>'
    )


async def index_page(request: Request) -> Response:
    """``GET /``: the list of runs."""
    return HTMLResponse((STATIC / "index.html").read_text(encoding="utf-8"))


async def run_page(request: Request) -> Response:
    """``GET /runs/<id>``: the live console of one run; an unknown id names the fix."""
    run_id = request.path_params["run_id"]
    workspace: Workspace = request.app.state.manager.workspace
    try:
        await workspace.get_run(run_id)
    except UserError:
        token = request.query_params.get("token")
        index = f"/?token={quote(token)}" if token else "/"
        body = (
            f"<p>There is no run <code>{html.escape(run_id)}</code> in the workspace "
            f"<code>{html.escape(str(workspace.root))}</code>.</p>"
            f'<p>Pick one from the <a href="{html.escape(index)}">list of runs</a>, or create one with '
            "<code>gepa-runtime optimize create --server URL ...</code>.</p>"
        )
        return HTMLResponse(message_page("Unknown run", body), status_code=404)
    return HTMLResponse((STATIC / "run.html").read_text(encoding="utf-8"))
