import os

from django.apps import AppConfig


class ShopConfig(AppConfig):
    name = "echoshop"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # What the old hosting recipe did: start the readers from ready(). Only the tests that
        # check the helper's guards (runserver's reloader, commands) ask for it.
        if os.environ.get("SHOP_EVENTS_IN_READY") == "1":
            from echomq.contrib.django import start_events

            start_events()
