"""What a stop signal means (``StopRule``), who sent it (``SenderAwareInbox``), and the three
ways a worker process learns its supervisor is gone (``Lifeline``, the parent-death signal),
each alone. tests/faults/test_stop_signals.py runs them all in real worker processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from echomq.processes.signals import (
    REPEAT_WINDOW_S,
    Lifeline,
    Meaning,
    Received,
    SenderAwareInbox,
    SignalInbox,
    StopRule,
    forced_by,
    set_parent_death_signal,
)

ROOT = Path(__file__).resolve().parents[2]
TERM, INT, QUIT = signal.SIGTERM, signal.SIGINT, signal.SIGQUIT


def meanings(*received: Received) -> list[Meaning]:
    rule = StopRule()
    return [rule.meaning(r) for r in received]


@pytest.mark.parametrize("first, again, meaning", [
    (Received(TERM, 0.0), Received(TERM, 0.01), Meaning.REPEAT),  # a group signal and its relay
    (Received(TERM, 0.0, 7), Received(TERM, 0.01, 7), Meaning.REPEAT),  # `timeout`: one sender, twice
    (Received(INT, 0.0, 7), Received(INT, 0.01, 7), Meaning.REPEAT),
    (Received(TERM, 0.0, 7), Received(TERM, REPEAT_WINDOW_S - 0.01, 7), Meaning.REPEAT),
    (Received(TERM, 0.0, 7), Received(TERM, REPEAT_WINDOW_S + 0.01, 7), Meaning.FORCE),  # an operator's, later
    (Received(TERM, 0.0), Received(TERM, REPEAT_WINDOW_S + 0.01), Meaning.FORCE),
    (Received(TERM, 0.0, 7), Received(TERM, 0.01, 8), Meaning.FORCE),  # someone else's
    (Received(INT, 0.0), Received(INT, 0.01), Meaning.FORCE),  # unknown senders: a terminal's Ctrl-C
    (Received(INT, 0.0, None, True), Received(INT, 0.2, None, True), Meaning.FORCE),  # Ctrl-C twice
    (Received(TERM, 0.0, 7), Received(INT, 0.01, 7), Meaning.FORCE),  # another signal
    (Received(TERM, 0.0), Received(QUIT, 0.01), Meaning.FORCE),
], ids=lambda v: None if isinstance(v, Received) else v.value)
def test_a_second_stop_signal_is_a_repeat_only_when_it_is_the_same_one_at_once(
        first: Received, again: Received, meaning: Meaning) -> None:
    assert meanings(first, again) == [Meaning.STOP, meaning]


def test_sigquit_forces_first_and_other_signals_are_not_stops() -> None:
    assert meanings(Received(QUIT, 0.0)) == [Meaning.FORCE]
    assert meanings(Received(signal.SIGCHLD, 0.0), Received(signal.SIGHUP, 0.0), Received(TERM, 0.1)) == [
        Meaning.OTHER, Meaning.OTHER, Meaning.STOP]
    assert meanings(Received(TERM, 0.0), Received(TERM, 0.1), Received(TERM, 5.0)) == [
        Meaning.STOP, Meaning.REPEAT, Meaning.FORCE]  # the window runs from the first


def test_what_forced_a_stop_is_told_with_its_sender() -> None:
    assert forced_by(Received(TERM, 0.0, 42)) == "a second stop signal (SIGTERM from pid 42)"
    assert forced_by(Received(INT, 0.0, None, True)) == "a second stop signal (SIGINT from the terminal)"
    assert forced_by(Received(QUIT, 0.0)) == "SIGQUIT"


@pytest.mark.skipif(not hasattr(signal, "sigtimedwait"), reason="no sigtimedwait here: the handlers record")
def test_a_sender_aware_inbox_knows_who_sent_a_signal() -> None:
    inbox = SenderAwareInbox((signal.SIGUSR1,)).install()
    try:
        assert inbox.synchronous
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)  # to this thread: blocked
        inbox.wait(2)
        [received] = inbox.take()
        assert (received.signum, received.sender, received.from_kernel) == (signal.SIGUSR1, os.getpid(), False)
        began = time.monotonic()
        inbox.wait(0.05)  # nothing pending: a bounded wait
        assert inbox.take() == [] and time.monotonic() - began < 1
    finally:
        inbox.restore()
    assert signal.SIGUSR1 not in signal.pthread_sigmask(signal.SIG_BLOCK, [])  # unblocked again


def test_a_lifeline_says_stop_then_gone() -> None:
    read_end, write_end = os.pipe()
    inbox = SignalInbox(())
    lifeline = Lifeline(read_end, os.getppid())
    inbox.watch(read_end)
    try:
        assert lifeline.look(inbox) is None
        os.write(write_end, Lifeline.STOP)
        inbox.wait(1)
        assert lifeline.look(inbox) == "its supervisor asked it to stop"
        assert lifeline.look(inbox) is None  # asked once
        os.close(write_end)
        began = time.monotonic()
        inbox.wait(5)  # end-of-file wakes it
        assert time.monotonic() - began < 1
        assert lifeline.look(inbox) == f"its supervisor (pid {os.getppid()}) is gone"
        assert lifeline.fd is None and read_end not in inbox._watched  # no busy loop on end-of-file
    finally:
        inbox.close()


def test_a_lifeline_whose_parent_changed_says_gone() -> None:
    read_end, write_end = os.pipe()
    inbox = SignalInbox(())
    try:
        lifeline = Lifeline(read_end, parent=os.getppid() + 1)  # the supervisor it was started by is not its parent
        assert lifeline.look(inbox) == f"its supervisor (pid {os.getppid() + 1}) is gone"
    finally:
        os.close(write_end)
        inbox.close()


_ORPHAN = textwrap.dedent("""
    import os, signal, sys, time
    from echomq.processes.signals import set_parent_death_signal
    ready_r, ready_w = os.pipe()
    if os.fork() == 0:
        got = []
        signal.signal(signal.SIGUSR1, lambda *_: got.append(1))
        os.write(ready_w, b"1" if set_parent_death_signal(signal.SIGUSR1) else b"0")
        deadline = time.monotonic() + 10
        while not got and time.monotonic() < deadline:
            time.sleep(0.01)
        with open(sys.argv[1], "w") as out:
            out.write("signalled" if got else "nothing")
        os._exit(0)
    assert os.read(ready_r, 1) == b"1"
    os._exit(0)  # the parent dies; the child is told
""")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_the_kernel_tells_a_child_its_parent_died(tmp_path: Path) -> None:
    out = tmp_path / "orphan"
    subprocess.run([sys.executable, "-c", _ORPHAN, str(out)], cwd=ROOT, check=True, timeout=30,
                   env={**os.environ, "PYTHONPATH": str(ROOT)})
    deadline = time.monotonic() + 10
    while not (out.exists() and out.read_text()) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert out.read_text() == "signalled"


def test_no_parent_death_signal_where_there_is_no_prctl(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "platform", "darwin")
    assert set_parent_death_signal(signal.SIGHUP) is False
