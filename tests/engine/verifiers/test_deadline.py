"""The watchdog deadline used to bound math verification in the calling thread."""

import threading
import time

import pytest

from engine.sandbox.deadline import DeadlineExceeded, run_with_deadline


def spin_forever():
    while True:
        pass


def test_a_runaway_python_loop_is_interrupted():
    with pytest.raises(DeadlineExceeded):
        run_with_deadline(spin_forever, 0.2)


def test_library_except_exception_does_not_swallow_it():
    def stubborn():
        while True:
            try:
                sum(range(1000))
            except Exception:  # noqa: BLE001 - what math-verify does around sympy calls
                pass

    with pytest.raises(DeadlineExceeded):
        run_with_deadline(stubborn, 0.2)


def test_returns_the_result_in_time():
    assert run_with_deadline(lambda: 6 * 7, 5) == 42


def test_a_finished_call_is_never_interrupted_later():
    for _ in range(200):
        run_with_deadline(lambda: sum(range(100)), 0.01)
    time.sleep(0.2)  # every deadline has passed; nothing may surface now
    total = 0
    for number in range(200_000):
        total += number
    assert total == sum(range(200_000))


def test_works_in_many_threads_at_once():
    outcomes = {}

    def work(name, function, seconds):
        try:
            outcomes[name] = run_with_deadline(function, seconds)
        except DeadlineExceeded:
            outcomes[name] = "deadline"

    threads = [threading.Thread(target=work, args=(f"quick{i}", lambda: "done", 5)) for i in range(4)]
    threads += [threading.Thread(target=work, args=(f"stuck{i}", spin_forever, 0.3)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert outcomes == {**{f"quick{i}": "done" for i in range(4)}, **{f"stuck{i}": "deadline" for i in range(2)}}
