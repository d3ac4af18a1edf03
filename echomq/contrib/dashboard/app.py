"""The dashboard's WSGI application: pages over the queue layer's reads, actions from the table.

Every page reads windows (counts, one page of ids, the newest log lines), never a whole list, and
finds the queues with one SCAN that is cached (``discovery_ttl``) rather than walked per page.
Everything a job carries is untrusted and reaches the page only through Jinja2's escaping; the
pages hold no inline script or style (the CSP forbids both), only ``static/dashboard.js``,
which polls server-rendered fragments into the parts of a page marked ``data-poll``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import redis
from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape

from ...clock import system_clock
from ...errors import EchoMQError, InvalidInputError, NotFoundError, PermissionDeniedError
from ...protocol.keys import DEFAULT_PREFIX, QueueKeys, names_queue_key, validate_prefix, validate_queue_name
from ...protocol.states import COUNTED, canonical_state
from ...queue import Job, Queue, admin, browse, discovery, edits, metrics
from ...schedule import JobScheduler
from ...transport.connection import Connection, close_any, open_connection, queue_client
from .actions import ACTIONS, for_scope
from .charts import throughput_svg
from .formats import cut, describe, duration, next_runs, page_number, pretty, when
from .http import Request, Response, StartResponse, redirect
from .security import COOKIE_NAME, Tokens, session_cookie

log = logging.getLogger(__name__)

#: The environ keys a framework mount sets: who is signed in (for the action log).
USER_KEY = "echomq.dashboard.user"

#: The states in the order the pages show them (``paused`` is the legacy list, shown when used).
STATE_ORDER = ("waiting", "prioritized", "delayed", "active", "waiting-children", "completed", "failed", "paused")
#: Log lines a job page shows (the newest ones), minutes a chart spans, schedulers per page.
LOG_LINES, CHART_MINUTES, SCHEDULERS_SHOWN = 100, 60, 50
_STATIC_DIR = Path(__file__).resolve().parent / "static"
_STATIC_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
#: Messages kept for sessions between an action's redirect and the page that shows it.
_FLASH_KEPT = 1000


class Dashboard:
    """The WSGI app. ``connection`` is a client or a URL (its password is never shown).

    ``queues``: show exactly these (else every queue under ``prefix``, found with SCAN at most
    every ``discovery_ttl`` seconds). ``read_only`` hides every button and refuses every action
    with 403. ``secret`` keys the action tokens (random per app when not given). ``poll_ms``:
    how often an open page refreshes its counts and its job's state.
    """

    def __init__(self, connection: Connection, *, prefix: str = DEFAULT_PREFIX, queues: Sequence[str] | None = None,
                 read_only: bool = False, secret: bytes | None = None, discovery_ttl: float = 30.0,
                 page_size: int = 25, label: str | None = None, poll_ms: int = 3000,
                 monotonic: Callable[[], float] = time.monotonic) -> None:
        validate_prefix(prefix)
        for name in queues or ():
            validate_queue_name(name)
        if isinstance(page_size, bool) or not isinstance(page_size, int) or not 1 <= page_size <= 1000:
            raise InvalidInputError(f"Dashboard: page_size={page_size!r} must be an int from 1 to 1000")
        self.client: redis.Redis = open_connection(connection)  # type: ignore[assignment]
        self._owns_client = isinstance(connection, str)
        self.prefix = prefix
        self.read_only = read_only
        self.page_size = page_size
        if isinstance(poll_ms, bool) or not isinstance(poll_ms, int) or poll_ms < 100:
            raise InvalidInputError(f"Dashboard: poll_ms={poll_ms!r} must be an int >= 100 (milliseconds)")
        self.poll_ms = poll_ms
        self.label = label or describe(connection)
        self._listed = tuple(queues) if queues else None
        self._ttl = discovery_ttl
        self._monotonic = monotonic
        self._found: tuple[float, list[str]] | None = None
        self._refreshing = False
        self._lock = threading.Lock()
        self._tokens = Tokens(secret)
        self._flash: OrderedDict[str, tuple[str, bool]] = OrderedDict()
        self._env = Environment(loader=PackageLoader("echomq.contrib.dashboard", "templates"),
                                autoescape=select_autoescape(default=True, default_for_string=True),
                                undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
        self._env.filters.update(when=when, pretty=pretty, cut=cut, duration=duration)
        self._static: dict[str, bytes] = {}

    def close(self) -> None:
        """Close the client when the dashboard made it from a URL (a client passed in stays open)."""
        if self._owns_client:
            close_any(self.client)

    # -- WSGI -----------------------------------------------------------------------------------
    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        request = Request.from_environ(environ)
        session = request.cookies.get(COOKIE_NAME, "")
        headers: list[tuple[str, str]] = []
        if len(session) < 16:
            session = self._tokens.new_session()
            secure = environ.get("wsgi.url_scheme") == "https"
            headers.append(("Set-Cookie", session_cookie(session, request.script_name or "/", secure=secure)))
        try:
            response = self._route(request, session)
        except NotFoundError as exc:
            response = self._page(request, session, "message.html", "404 Not Found", title="Not found",
                                  message=str(exc), error=True)
        except InvalidInputError as exc:
            response = self._page(request, session, "message.html", "400 Bad Request", title="Cannot show this",
                                  message=str(exc), error=True)
        except (redis.RedisError, PermissionDeniedError) as exc:
            log.warning("dashboard: Redis at %s: %s", self.label, exc)
            response = self._page(request, session, "message.html", "503 Service Unavailable",
                                  title="Redis did not answer", message=f"Redis at {self.label}: {exc}", error=True)
        response.headers.extend(headers)
        return response(environ, start_response)

    def _route(self, request: Request, session: str) -> Response:
        path = request.path
        if path.startswith("/static/"):
            return self._static_file(path[len("/static/"):])
        if path.startswith("/action/"):
            if request.method != "POST":
                return Response("actions are POST only", "405 Method Not Allowed", "text/plain; charset=utf-8",
                                [("Allow", "POST")])
            return self._act(request, session, path[len("/action/"):])
        if request.method not in ("GET", "HEAD"):
            return Response("method not allowed", "405 Method Not Allowed", "text/plain; charset=utf-8",
                            [("Allow", "GET, HEAD")])
        pages: dict[str, Callable[[Request, str], Response]] = {
            "/": self._overview, "/queue": self._queue, "/job": self._job, "/find": self._find,
            "/schedulers": self._schedulers, "/fragment/overview": self._overview_fragment,
            "/fragment/queue": self._queue_fragment, "/fragment/job": self._job_fragment,
        }
        page = pages.get(path)
        if page is None:
            raise NotFoundError(f"no page {path!r}")
        return page(request, session)

    # -- rendering ------------------------------------------------------------------------------
    def _page(self, request: Request, session: str, template: str, status: str = "200 OK",
              **context: Any) -> Response:
        flash = self._flash.pop(session, None)
        html = self._env.get_template(template).render(
            url=request.url, token=self._tokens.token_for(session), read_only=self.read_only,
            actions_for=self._actions_for, label=self.label, prefix=self.prefix, flash=flash,
            poll_ms=self.poll_ms, **context)
        return Response(html, status)

    def _fragment(self, request: Request, session: str, template: str, **context: Any) -> Response:
        html = self._env.get_template(template).render(
            url=request.url, token=self._tokens.token_for(session), read_only=self.read_only,
            actions_for=self._actions_for, **context)
        return Response(html)

    def _actions_for(self, scope: str, **context: Any) -> list[tuple[str, Any]]:
        return [] if self.read_only else for_scope(scope, context)

    def _static_file(self, name: str) -> Response:
        suffix = name[name.rfind("."):] if "." in name else ""
        if "/" in name or name.startswith(".") or suffix not in _STATIC_TYPES:
            raise NotFoundError(f"no file {name!r}")
        if name not in self._static:
            try:
                self._static[name] = (_STATIC_DIR / name).read_bytes()
            except (FileNotFoundError, IsADirectoryError):
                raise NotFoundError(f"no file {name!r}") from None
        return Response(self._static[name], content_type=_STATIC_TYPES[suffix],
                        headers=[("Cache-Control", "max-age=300")])

    # -- queues ---------------------------------------------------------------------------------
    def queue_names(self) -> list[str]:
        """The queues shown: those given, else those the last SCAN found. Only the first call
        waits for the SCAN; once ``discovery_ttl`` has passed, the next call starts a new one in
        the background and answers with the list it has (a SCAN of a big keyspace takes
        seconds: no page load waits for it but the first)."""
        if self._listed is not None:
            return list(self._listed)
        with self._lock:
            found = self._found
            if found is None:
                self._found = found = (self._monotonic(), discovery.find_queues(self.client, self.prefix))
            elif not self._refreshing and self._monotonic() - found[0] >= self._ttl:
                self._refreshing = True
                threading.Thread(target=self._rediscover, name="echomq-dashboard-discovery", daemon=True).start()
            return list(found[1])

    def _rediscover(self) -> None:
        try:
            names = discovery.find_queues(self.client, self.prefix)
        except (redis.RedisError, EchoMQError) as exc:  # the next page load tries again
            log.warning("dashboard: finding the queues under prefix %r failed: %s", self.prefix, exc)
            names = None
        with self._lock:
            if names is not None:
                self._found = (self._monotonic(), names)
            self._refreshing = False

    def _known_queue(self, request: Request, name: str | None = None) -> str:
        """The queue the request names (``q``, or ``name``), if it is one shown here: listed,
        found by the last SCAN, or (when no list was given) one whose meta hash exists now,
        remembered from then on."""
        name = request.query.get("q", "") if name is None else name
        validate_queue_name(name)
        if name in self.queue_names():
            return name
        if self._listed is None and discovery.queue_exists(self.client, name, self.prefix):
            with self._lock:
                if self._found is not None and name not in self._found[1]:
                    self._found = (self._found[0], sorted([*self._found[1], name]))
            return name
        raise NotFoundError(f"no queue {name!r} under prefix {self.prefix!r}")

    def _overview_rows(self) -> list[dict[str, Any]]:
        names = self.queue_names()
        summaries = discovery.summarize_queues(self.client, names, self.prefix)
        limits = browse.queue_limits(self.client, [QueueKeys(name, self.prefix) for name in names])
        return [{"summary": summary, "limits": limit} for summary, limit in zip(summaries, limits)]

    def _overview(self, request: Request, session: str) -> Response:
        return self._page(request, session, "overview.html", title="Queues", rows=self._overview_rows(),
                          states=STATE_ORDER)

    def _overview_fragment(self, request: Request, session: str) -> Response:
        return self._fragment(request, session, "_overview_rows.html", rows=self._overview_rows(), states=STATE_ORDER)

    def _queue_state(self, name: str) -> dict[str, Any]:
        keys = QueueKeys(name, self.prefix)
        summary = discovery.summarize_queues(self.client, [name], self.prefix)[0]
        return {"name": name, "summary": summary, "limits": browse.queue_limits(self.client, [keys])[0],
                "states": [s for s in STATE_ORDER if s != "paused" or summary.counts.get("paused")]}

    def _list_state(self, request: Request) -> str:
        try:
            state = canonical_state(request.query.get("state") or "waiting")
        except InvalidInputError:
            raise InvalidInputError(f"state {request.query.get('state')!r} is not one of {', '.join(COUNTED)}") \
                from None
        return state

    def _queue(self, request: Request, session: str) -> Response:
        name = self._known_queue(request)
        state = self._list_state(request)
        page = page_number(request.query.get("page"))
        keys = QueueKeys(name, self.prefix)
        header = self._queue_state(name)
        total = header["summary"].counts.get(state, 0)
        start = (page - 1) * self.page_size
        node = queue_client(self.client, keys.meta)  # on a cluster, the master of the queue's slot
        jobs = admin.get_jobs(node, keys, state, start, start + self.page_size - 1, False, system_clock)
        try:
            workers: list[dict[str, str]] | None = admin.get_workers(node, keys)
        except EchoMQError:  # the ACL refuses CLIENT LIST
            workers = None
        points = {kind: metrics.get_metrics(node, keys, kind, 0, CHART_MINUTES - 1)["data"]
                  for kind in metrics.METRIC_KINDS}
        return self._page(request, session, "queue.html", title=name, state=state, page=page, jobs=jobs,
                          total=total, pages=max(1, -(-total // self.page_size)), workers=workers,
                          chart=throughput_svg(points, CHART_MINUTES), has_metrics=any(points.values()),
                          **header)

    def _queue_fragment(self, request: Request, session: str) -> Response:
        name = self._known_queue(request)
        return self._fragment(request, session, "_queue_header.html", state=self._list_state(request),
                              **self._queue_state(name))

    # -- jobs -----------------------------------------------------------------------------------
    def _fetch(self, request: Request, name: str) -> Job:
        job_id = request.query.get("id", "")
        if not job_id:
            raise InvalidInputError("no job id given")
        job = Job.fetch(self.client, QueueKeys(name, self.prefix), job_id) if names_queue_key(job_id) is None else None
        if job is None:
            raise NotFoundError(f"no job {job_id!r} in queue {name!r}")
        return job

    def _job_status(self, request: Request, name: str) -> dict[str, Any]:
        job = self._fetch(request, name)
        return {"name": name, "job": job, "state": job.get_state()}

    def _job(self, request: Request, session: str) -> Response:
        name = self._known_queue(request)
        status = self._job_status(request, name)
        job: Job = status["job"]
        keys = QueueKeys(name, self.prefix)
        node = queue_client(self.client, keys.meta)
        logs, log_count = edits.read_logs(node, keys, job.id, 0, LOG_LINES - 1, False)
        children = browse.job_children(node, keys, job.id)
        return self._page(request, session, "job.html", title=f"job {job.id}", logs=list(reversed(logs)),
                          log_count=log_count, children=children, link=self._job_link(request),
                          parent=browse.parent_job_key(job.parent) or job.parent_key, **status)

    def _job_fragment(self, request: Request, session: str) -> Response:
        name = self._known_queue(request)
        return self._fragment(request, session, "_job_status.html", **self._job_status(request, name))

    def _job_link(self, request: Request) -> Callable[[str | None], str | None]:
        """A link to the job a full job key names, when it is a job of a queue shown here."""
        def link(key: str | None) -> str | None:
            parts = browse.split_job_key(key) if key else None
            if parts is None or parts[0] != self.prefix:
                return None
            return request.url("/job", q=parts[1], id=parts[2])
        return link

    def _find(self, request: Request, session: str) -> Response:
        name = self._known_queue(request)
        job_id = request.query.get("id", "").strip()
        if job_id and names_queue_key(job_id) is None and Job.fetch(self.client, QueueKeys(name, self.prefix),
                                                                      job_id) is not None:
            return redirect(request.url("/job", q=name, id=job_id))
        self._set_flash(session, f"no job {job_id!r} in queue {name!r}", error=True)
        return redirect(request.url("/queue", q=name))

    # -- schedulers -----------------------------------------------------------------------------
    def _schedulers(self, request: Request, session: str) -> Response:
        name = self._known_queue(request)
        scheduler = JobScheduler(self.client, name, prefix=self.prefix)
        records = scheduler.list(0, SCHEDULERS_SHOWN - 1, asc=True)
        runs = scheduler.histories([r.id for r in records], limit=10)
        rows = [{"record": r, "next_runs": next_runs(r), "runs": runs[r.id]} for r in records]
        return self._page(request, session, "schedulers.html", title=f"{name}: schedulers", name=name, rows=rows,
                          total=scheduler.count())

    # -- actions --------------------------------------------------------------------------------
    def _set_flash(self, session: str, message: str, *, error: bool = False) -> None:
        with self._lock:
            self._flash[session] = (message, error)
            while len(self._flash) > _FLASH_KEPT:
                self._flash.popitem(last=False)

    def _act(self, request: Request, session: str, name: str) -> Response:
        if self.read_only:
            return Response("this dashboard is read-only: no action runs", "403 Forbidden",
                            "text/plain; charset=utf-8")
        if request.cookies.get(COOKIE_NAME) != session or not self._tokens.valid(session, request.form.get("csrf")):
            return Response("missing or wrong action token: reload the page and try again", "403 Forbidden",
                            "text/plain; charset=utf-8")
        action = ACTIONS.get(name)
        if action is None:
            raise NotFoundError(f"no action {name!r}")
        queue_name = self._known_queue(request, request.form.get("queue", ""))
        back = request.form.get("next", "")
        if not _own_path(back, request.script_name):
            back = request.url("/queue", q=queue_name)
        if action.destructive and request.form.get("confirm") != "yes":
            fields = {k: v for k, v in request.form.items() if k not in ("csrf", "confirm")}
            return self._page(request, session, "confirm.html", title="Confirm", action=action, action_name=name,
                              fields=fields, queue=queue_name, back=back)
        who = str(request.environ.get(USER_KEY) or request.environ.get("REMOTE_USER")
                  or f"anonymous from {request.remote_addr or '?'}")
        target = request.form.get("id") or request.form.get("scheduler") or request.form.get("state") or ""
        queue = Queue(self.client, queue_name, prefix=self.prefix)
        try:
            message = action.run(queue, request.form)
        except EchoMQError as exc:
            log.warning("dashboard: %s on queue %r %s by %s refused: %s", name, queue_name, target, who, exc)
            self._set_flash(session, f"{action.label}: {exc}", error=True)
        else:
            log.info("dashboard: %s on queue %r %s by %s: %s", name, queue_name, target, who, message)
            self._set_flash(session, f"{action.label}: {message}")
        return redirect(back)


def _own_path(path: str, script_name: str) -> bool:
    """Whether ``path`` is a page of this dashboard to send the browser back to: under its mount,
    never another host (``//host``, ``/\\host``, which browsers read as ``//host``) and nothing
    that could end the Location header (a control character)."""
    return (path.startswith(script_name + "/") and not path.startswith("//") and "\\" not in path
            and all(" " < char != "\x7f" for char in path))
