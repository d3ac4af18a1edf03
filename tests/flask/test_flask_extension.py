"""The extension's app-factory side: one EchoMQ, several apps with their own config; jobs run
inside the app's context; bad configuration refused at init_app, by key."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import redis
from flask import Flask
from flask_app import build_report, echomq, send_welcome

from echomq import InvalidInputError, InvalidJobOptionsError, InvalidScheduleError, Queue
from echomq.contrib.flask import EchoMQ
from echomq.testing import run_until_idle


def test_two_apps_of_one_factory_keep_their_own_connection_prefix_and_defaults(
        make_app: Callable[..., Flask], connection: redis.Redis, prefix: str) -> None:
    other_prefix = prefix + ":b"  # under the fixture's prefix: deleted with it
    first = make_app(ECHOMQ_CONNECTION=connection, ECHOMQ_PREFIX=prefix, GREETING="first",
                     ECHOMQ_QUEUES={"mail": {"attempts": 5, "backoff": {"type": "fixed", "delay": 1000}}})
    second = make_app(ECHOMQ_CONNECTION=lambda: connection, ECHOMQ_PREFIX=other_prefix, GREETING="second")
    first_id = first.test_client().post("/signup", data={"email": "a@example.com"}).get_json()["job_id"]
    second_id = second.test_client().post("/signup", data={"email": "b@example.com"}).get_json()["job_id"]

    first_job = Queue(connection, "mail", prefix=prefix).get_job(first_id)
    second_job = Queue(connection, "mail", prefix=other_prefix).get_job(second_id)
    assert (first_job.data, second_job.data) == ({"to": "a@example.com"}, {"to": "b@example.com"})
    assert Queue(connection, "mail", prefix=other_prefix).get_job_counts("wait") == {"wait": 1}
    # The app's ECHOMQ_QUEUES default under the decorator's own (attempts=2 wins).
    assert first_job.opts["attempts"] == 2 and first_job.opts["backoff"] == {"type": "fixed", "delay": 1000}
    assert second_job.opts["attempts"] == 2 and "backoff" not in second_job.opts
    assert echomq.registry_for(first) is not echomq.registry_for(second)

    # Each app's jobs run in that app's context: run here, in the test's thread, no app pushed.
    for app, job_id, greeting in ((first, first_id, "first"), (second, second_id, "second")):
        registry = echomq.registry_for(app)
        ran = run_until_idle(registry.queue("mail"), registry.processors("mail"))
        assert [(run.job_id, run.return_value["greeting"]) for run in ran] == [(job_id, greeting)]


def test_a_job_declared_after_init_app_is_registered_in_every_app(make_app: Callable[..., Flask],
                                                                  connection: redis.Redis, prefix: str) -> None:
    app = make_app(ECHOMQ_CONNECTION=connection, ECHOMQ_PREFIX=prefix)
    late = EchoMQ()
    late_app, other_app = Flask("late"), Flask("other")
    for each in (late_app, other_app):
        each.config.update(ECHOMQ_CONNECTION=connection, ECHOMQ_PREFIX=prefix)
        late.init_app(each)

    @late.job(queue="late-queue", priority=3)
    def shout(job: Any) -> str:
        return str(job.data["word"]).upper()

    with late_app.app_context():
        job = shout.enqueue(word="hi")
    assert job.opts["priority"] == 3
    ran = run_until_idle(late.registry_for(late_app).queue("late-queue"), late.registry_for(late_app).processors(
        "late-queue"))
    assert ran.outcomes() == ["completed"] and ran[0].return_value == "HI"
    assert shout(type("Job", (), {"data": {"word": "direct"}})()) == "DIRECT"  # still the plain function
    assert late.registry_for(other_app).queues == ("late-queue",)
    assert echomq.registry_for(app).queues == ("mail", "reports")  # another extension's jobs stay its own


def test_enqueue_needs_an_app_initialised_with_the_extension() -> None:
    with pytest.raises(RuntimeError, match="app context"):
        send_welcome.enqueue(to="a@example.com")
    stranger = Flask("stranger")
    with stranger.app_context(), pytest.raises(RuntimeError, match="not initialised with this EchoMQ"):
        build_report.enqueue()


def test_init_app_twice_and_a_job_declared_twice_are_refused(make_app: Callable[..., Flask]) -> None:
    app = make_app(ECHOMQ_URL="redis://127.0.0.1:6379/0")
    with pytest.raises(InvalidInputError, match="already initialised"):
        echomq.init_app(app)
    with pytest.raises(InvalidInputError, match="declared twice for queue 'mail'"):
        echomq.job(queue="mail", name="send_welcome")(lambda job: None)
    with pytest.raises(InvalidJobOptionsError, match=r"job 'broken' of queue 'mail'.*atempts"):
        echomq.job(queue="mail", name="broken", atempts=3)(lambda job: None)
    assert echomq.registry_for(app).queues == ("mail", "reports")  # nothing half registered


@pytest.mark.parametrize(("config", "error", "message"), [
    ({"ECHOMQ_URL": "http://localhost"}, InvalidInputError, r"ECHOMQ_URL.*must start with redis://"),
    ({"ECHOMQ_URL": 6379}, InvalidInputError, r"ECHOMQ_URL.*must be a redis:// URL"),
    ({"ECHOMQ_URL": "redis://localhost", "ECHOMQ_CONNECTION": redis.Redis}, InvalidInputError, "not both"),
    ({"ECHOMQ_CONNECTION": "redis://localhost"}, InvalidInputError, r"ECHOMQ_CONNECTION.*function returning"),
    ({"ECHOMQ_PREFIX": "a{b}"}, InvalidInputError, r"ECHOMQ_PREFIX.*braces"),
    ({"ECHOMQ_QUEUES": ["mail"]}, InvalidInputError, r"ECHOMQ_QUEUES.*must map queue names"),
    ({"ECHOMQ_QUEUES": {"a:b": {}}}, InvalidInputError, r"ECHOMQ_QUEUES.*'a:b'"),
    ({"ECHOMQ_QUEUES": {"mail": 3}}, InvalidJobOptionsError, r"ECHOMQ_QUEUES'\]\['mail'\]: must be a mapping"),
    ({"ECHOMQ_QUEUES": {"mail": {"atempts": 3}}}, InvalidJobOptionsError, r"\['mail'\].*did you mean 'attempts'"),
    ({"ECHOMQ_SCHEDULES": {"nightly": {"pattern": "0 2 * * *"}}}, InvalidScheduleError, r"'nightly'.*names no queue"),
    ({"ECHOMQ_SCHEDULES": {"nightly": {"queue": "reports", "pattern": "0 25 * * *"}}}, InvalidScheduleError,
     r"ECHOMQ_SCHEDULES.*'nightly'.*pattern"),
    ({"ECHOMQ_SCHEDULES": {"nightly": {"queue": "reports", "every": 1000, "cron": "x"}}}, InvalidScheduleError,
     r"'nightly'.*unknown key\(s\) cron"),
    ({"ECHOMQ_EVENTS": "sometimes"}, InvalidInputError, r"ECHOMQ_EVENTS.*'auto', 'always', 'manual'"),
    ({"ECHOMQ_QUEUE": {}}, InvalidInputError, r"unknown key 'ECHOMQ_QUEUE' \(did you mean 'ECHOMQ_QUEUES'\?\)"),
])
def test_bad_configuration_is_refused_at_init_app_by_key(config: dict[str, Any], error: type[Exception],
                                                         message: str) -> None:
    app = Flask("misconfigured")
    app.config.update(config)
    with pytest.raises(error, match=message):
        echomq.init_app(app)
    assert "echomq" not in app.extensions and "echomq" not in app.cli.commands
    assert isinstance(error("x"), ValueError)


def test_a_connection_factory_is_called_once_per_process(make_app: Callable[..., Flask],
                                                         connection: redis.Redis, prefix: str) -> None:
    calls: list[int] = []

    def connect() -> redis.Redis:
        calls.append(1)
        return connection

    app = make_app(ECHOMQ_CONNECTION=connect, ECHOMQ_PREFIX=prefix)
    assert calls == []  # init_app connects nothing
    client = app.test_client()
    for n in range(3):
        assert client.post("/signup", data={"email": f"{n}@example.com"}).status_code == 202
    assert calls == [1]
    assert Queue(connection, "mail", prefix=prefix).get_job_counts("wait") == {"wait": 3}


def test_a_job_whose_options_clash_with_an_apps_queue_defaults_is_registered_nowhere() -> None:
    extension = EchoMQ()
    plain, strict = Flask("plain"), Flask("strict")
    strict.config["ECHOMQ_QUEUES"] = {"flows": {"fail_parent_on_failure": True}}
    for app in (plain, strict):
        extension.init_app(app)
    with pytest.raises(InvalidJobOptionsError, match=r"app 'strict', job 'child'.*cannot be used together"):
        extension.job(queue="flows", name="child", continue_parent_on_failure=True)(lambda job: None)
    assert extension.registry_for(plain).queues == extension.registry_for(strict).queues == ()
    late = Flask("late")
    late.config["ECHOMQ_QUEUES"] = {"flows": {"fail_parent_on_failure": True}}
    declared_first = EchoMQ()
    declared_first.job(queue="flows", name="other", continue_parent_on_failure=True)(lambda job: None)
    with pytest.raises(InvalidJobOptionsError, match=r"app 'late', job 'other'"):
        declared_first.init_app(late)
    assert "echomq" not in late.extensions
