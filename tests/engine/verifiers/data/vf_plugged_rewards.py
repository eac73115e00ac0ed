"""Reward functions plugged into a verifiers taskset through its own config (``task.rewards.<name>.fn``,
verifiers' public way to swap a task's reward), for the faults a taskset's author code can have."""

import socket


async def raises(trace):
    raise ValueError("the grader has a bug")


async def spins(trace):
    while True:
        pass


async def writes_a_file(trace):
    with open("/tmp/passband-reward-was-here", "w") as handle:
        handle.write("x")
    return 1.0


async def calls_home(trace):
    socket.create_connection(("127.0.0.1", 9), timeout=1)
    return 1.0


async def not_a_number(trace):
    return float("nan")


async def needs_a_sandbox(trace, runtime):
    return 1.0


async def pays_anything(trace):
    return 1.0


async def ignores_the_deadline(trace):
    while True:
        try:
            while True:
                pass
        except BaseException:  # noqa: BLE001 - swallows the helper's soft deadline: only a kill stops it
            pass


async def hoards_memory(trace):
    return float(len(b"x" * (8 << 30)))
