"""The app config of ``"echomq.contrib.django"`` in ``INSTALLED_APPS``.

``ready()`` only connects: the system checks, the ``request_started`` receiver that starts a
serving process's events readers on its first request (``events.start_on_request``), and the
``setting_changed`` receiver that makes an overridden ``ECHOMQ`` count. It opens no connection
and starts no thread, so ``migrate``, ``shell`` and the test runner stay as they were.
"""

from __future__ import annotations

from django.apps import AppConfig  # type: ignore[import-untyped]
from django.core.signals import request_started, setting_changed  # type: ignore[import-untyped]


class EchoMQConfig(AppConfig):  # type: ignore[misc]
    name = "echomq.contrib.django"
    label = "echomq"
    verbose_name = "EchoMQ"

    def ready(self) -> None:
        from django.core import checks as django_checks  # type: ignore[import-untyped]

        from . import checks, conf, events

        django_checks.register(checks.check_echomq_setting, checks.TAG)
        request_started.connect(events.start_on_request, dispatch_uid="echomq-events-start")
        setting_changed.connect(conf.forget, dispatch_uid="echomq-setting-changed")
