"""Flask integration: ``EchoMQ``, an extension with ``init_app`` (the app-factory pattern).

::

    echomq = EchoMQ()                        # myapp/extensions.py

    @echomq.job(queue="mail")                # myapp/jobs.py
    def send_welcome(job):
        ...current_app.config...             # jobs run inside the app's context

    def create_app():
        app = Flask(__name__)
        app.config["ECHOMQ_URL"] = "redis://localhost:6379/0"
        echomq.init_app(app)                 # reads ECHOMQ_*, adds `flask echomq worker|schedules`
        return app

In a view, ``send_welcome.enqueue(to="ada@example.com")``. Flask is imported only by this
package (``pip install flask``); nothing here starts a thread or connects at import or at
``init_app``. docs/flask.md is the guide, with the table of settings.
"""

from .extension import EchoMQ, FlaskJob
from .settings import SETTINGS
from .state import AppState

__all__ = ["SETTINGS", "AppState", "EchoMQ", "FlaskJob"]
