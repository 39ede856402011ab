"""``schedfence serve``: the HTTP admin API (infra/http) over this store, with uvicorn.

It refuses to start without a tokens file (``--tokens`` or ``SCHEDFENCE_TOKENS_FILE``), binds
to loopback unless told otherwise, and needs a destination like every command that reaches one
(``--destination`` or ``SCHEDFENCE_DESTINATION``). ``--print-openapi`` prints the API's OpenAPI
document (``schemas/openapi.json``) and opens nothing. Registered by infra/cli/commands.py.

Everything it logs, its own start-up lines and uvicorn's (start-up, errors, one access record
per request), goes to stderr through the project's formatter (``--log-format``, secrets
scrubbed, every accepted token blanked wherever it appears); stdout stays empty. These lines
are logged from ``info`` (or the configured level, if lower), as a server always showed them.
"""
from __future__ import annotations

import ipaddress

import click

from schedfence.domain.errors import InvalidArgument

from schedfence.infra.cli.commands import cli_state
from schedfence.infra.http.settings import MAX_BODY, RATE, TEMPORAL_UI_ENV, TOKENS_ENV
from schedfence.infra.adapters.observability import logs
from schedfence.projections.oncall import STUCK_AFTER

MAX_RATE = 100_000.0
MAX_STUCK_AFTER = 100 * 365 * 86400.0  # seconds: a century, as GET /v1/oncall allows
LOG = logs.get_logger("serve")
SERVER_LOGGERS = ("uvicorn", "py.warnings")  # uvicorn.error, uvicorn.access; warnings


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (an IPv6 host in brackets); port 0 takes a free one."""
    host, sep, port = text.strip().rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise InvalidArgument(f"--listen {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8080")
    return host, int(port)


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@click.command()
@click.option("--listen", default="127.0.0.1:8080", show_default=True, metavar="HOST:PORT",
              help="Where to listen; anything but loopback is reachable from other machines "
                   "(put TLS in front of it).")
@click.option("--tokens", "tokens_file", envvar=TOKENS_ENV, default=None, metavar="FILE",
              help="The tokens file: lines NAME ROLE SECRET, or JSON "
                   "(docs/operators.md, HTTP API); "
                   f"env {TOKENS_ENV}. Required.")
@click.option("--store", "serve_store", default=None, metavar="URL",
              help="The store (default: the group's --store / SCHEDFENCE_STORE).")
@click.option("--max-body", type=click.IntRange(1, 16 * 1024 * 1024), default=MAX_BODY,
              show_default=True, help="Largest request body in bytes (larger: 413).")
@click.option("--rate-limit", type=click.FloatRange(0, MAX_RATE), default=RATE,
              show_default=True, help="Requests a second per token, in bursts of twice that "
                                      "(over it: 429); 0 = no limit.")
@click.option("--temporal-ui", envvar=TEMPORAL_UI_ENV, default=None, metavar="URL",
              help="Temporal's Web UI (e.g. http://localhost:8233): the web page links "
                   f"handed-over schedules and workflows into it; env {TEMPORAL_UI_ENV}. "
                   "Default: no links.")
@click.option("--stuck-after", type=click.FloatRange(0, MAX_STUCK_AFTER), default=STUCK_AFTER,
              show_default=True, metavar="SECONDS",
              help="Seconds without progress before an open migration counts as stuck, where "
                   "a request does not say: GET /v1/oncall, the web page, the gauge "
                   "schedfence_oncall_stuck.")
@click.option("--print-openapi", is_flag=True,
              help="Print the API's OpenAPI document and exit (opens nothing).")
def serve(listen: str, tokens_file: str | None, serve_store: str | None, max_body: int,
          rate_limit: float, temporal_ui: str | None, stuck_after: float,
          print_openapi: bool) -> None:
    """Serve the HTTP admin API (and the web page at /ui/) over this store."""
    from schedfence.infra.http.app import create_app, openapi_text  # the framework: only here
    from schedfence.infra.http.auth import load_tokens
    from schedfence.infra.web.overview import TemporalUI

    if print_openapi:
        click.echo(openapi_text(), nl=False)
        return
    host, port = parse_listen(listen)
    TemporalUI.at(temporal_ui)  # a bad URL is refused before anything is opened
    tokens = load_tokens(tokens_file)  # before the store is opened: refused, nothing created
    state = cli_state()
    if serve_store is not None:
        state.store = serve_store
    service = state.service()
    app = create_app(service, tokens, destination_label=state.destination_label,
                     max_body=max_body, rate=rate_limit, temporal_ui=temporal_ui,
                     stuck_after=stuck_after)
    import uvicorn

    level = _server_logs()
    shown = f"[{host}]" if ":" in host else host
    LOG.info("schedfence serve: %d token(s), destination %s, listening on http://%s:%d",
             len(tokens), state.destination_label, shown, port)
    if not is_loopback(host):
        LOG.warning("%s is not a loopback address: the API is reachable from other machines, "
                    "and tokens travel in clear text without TLS", host)
    uvicorn.run(app, host=host, port=port, log_level=level, log_config=None,
                server_header=False)


def _server_logs() -> str:
    """Route serve's and uvicorn's records through the project's handler (logs.adopt), the
    access records with their fields; returns the level uvicorn is to log from."""
    import logging

    logging.captureWarnings(True)  # a library's warning is a record too, not a bare line
    level = logs.adopt(LOG.name)
    for name in SERVER_LOGGERS:
        logs.adopt(name)
    logging.getLogger("uvicorn.access").addFilter(logs.AccessFields())
    return level
