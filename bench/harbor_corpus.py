"""Sweep: the red team's code corpus (CODE_ATTACKS in tests/engine/verifiers/test_hostile_corpus.py) through the
Harbor task folders of its two tasks (engine/integrations/harbor_code.py), graded by the exported tests/test.sh as
Harbor runs it, by hand: every attack, in both styles (humaneval, asserts) and both isolations (the sandbox's own
pick, and the fallback Harbor's Docker container leaves). The folder's reward must be 1 exactly where Passband's
`verify` says pass, and only the honest solution may pass. The suite grades a representative few with these
functions (tests/engine/integrations/test_harbor_code.py); this runs them all.

    .venv/bin/python bench/harbor_corpus.py [--attacks 26]

Prints each case whose reward disagrees, and the time taken; exits 1 if there is any.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from engine.integrations.harbor_code import code_harbor_folder  # noqa: E402
from engine.verifiers.kinds import code  # noqa: E402
from tests.engine.verifiers.test_hostile_corpus import ADD, ASSERTS, CODE_ATTACKS, verdict_of  # noqa: E402

HONEST = {"humaneval": ADD["code_prefix"] + "    return a + b\n", "asserts": "def add(a, b):\n    return a + b\n"}
VERIFIERS = {"humaneval": ADD, "asserts": ASSERTS}
ISOLATIONS = ("auto", "fallback")


def write_corpus_folders(root: Path) -> dict[str, Path]:
    """The corpus's ADD (humaneval) and ASSERTS tasks as Harbor task folders under `root`, by style. Each folder
    first proves, on the honest program, that its verifier runs the program in a sandbox: the corpus must never
    run outside one (on the host, `os.kill(-1, SIGKILL)` as root ends every process of the machine)."""
    folders = {}
    for style, verifier in VERIFIERS.items():
        folder = root / style
        files = code_harbor_folder(
            key=style,
            prompt="Write add(a, b).",
            answer=HONEST[style],
            raw_config=verifier,
            config=code.parse_config(verifier),
        )
        for path, data in files.items():
            (folder / path).parent.mkdir(parents=True, exist_ok=True)
            (folder / path).write_bytes(data)
        _, verdict = harbor_verdict(folder, HONEST[style], root / f"probe-{style}", isolation="auto")
        if verdict.get("isolation") not in ("namespaces", "fallback"):
            raise RuntimeError(f"the {style} folder's verifier has no sandbox: {verdict}")
        folders[style] = folder
    return folders


def harbor_verdict(folder: Path, program: str, run: Path, *, isolation: str) -> tuple[str, dict]:
    """test.sh run by hand on `program` as /app/solution.py: the reward, and the verdict it wrote ({} if none)."""
    app, logs = run / "app", run / "logs"
    app.mkdir(parents=True)
    (app / "solution.py").write_text(program)
    env = {
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "APP": str(app),
        "LOGS": str(logs),
        "PASSBAND_SANDBOX_ISOLATION": isolation,
    }
    subprocess.run(["bash", str(folder / "tests" / "test.sh")], env=env, capture_output=True, timeout=120)
    verdict = logs / "verdict.json"
    return (logs / "reward.txt").read_text().strip(), json.loads(verdict.read_text()) if verdict.exists() else {}


def disagreement(folders: dict[str, Path], run: Path, *, name: str, style: str, isolation: str) -> str | None:
    """None when the folder pays `name` (an attack, or "honest solution") what it must, else what went wrong."""
    program = HONEST[style] if name == "honest solution" else CODE_ATTACKS[name]
    reward, verdict = harbor_verdict(folders[style], program, run, isolation=isolation)
    passband = verdict_of(VERIFIERS[style], program)
    if reward != ("1" if name == "honest solution" else "0"):
        return f"reward {reward}: {verdict}"
    if reward != ("1" if passband.outcome == "pass" else "0"):
        return f"reward {reward} where Passband says {passband.outcome}: {verdict}"
    if isolation == "fallback" and verdict.get("isolation") != "fallback":
        return f"asked for the fallback, ran under {verdict.get('isolation')}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attacks", type=int, default=len(CODE_ATTACKS), help="the first N attacks by name (all)")
    options = parser.parse_args()
    names = [*sorted(CODE_ATTACKS)[: options.attacks], "honest solution"]
    started = time.perf_counter()
    wrong = []
    with tempfile.TemporaryDirectory(prefix="harbor-corpus-") as root:
        folders = write_corpus_folders(Path(root))
        for index, (name, style, isolation) in enumerate(
            (name, style, isolation) for name in names for style in VERIFIERS for isolation in ISOLATIONS
        ):
            problem = disagreement(folders, Path(root) / f"run-{index}", name=name, style=style, isolation=isolation)
            if problem:
                wrong.append(f"{name} / {style} / {isolation}: {problem}")
    cases = len(names) * len(VERIFIERS) * len(ISOLATIONS)
    print(f"{cases} cases graded in {time.perf_counter() - started:.1f} s")
    print(f"the folder paid what Passband's verifier passes: {cases - len(wrong)} of {cases}")
    for line in wrong:
        print("  " + line)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
