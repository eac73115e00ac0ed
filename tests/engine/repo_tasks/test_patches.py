"""Reading a model's patch and dropping what it may not touch."""

from engine.repo_tasks.patches import diff_files, extract_patch, filter_patch, split_patch


def test_the_diff_is_read_from_fences_or_from_its_first_header():
    diff = "--- a/x.py\n+++ b/x.py\n@@ -1 +1 @@\n-a\n+b\n"
    assert extract_patch(f"Here is the fix:\n```diff\n{diff}```\nDone.") == diff
    assert extract_patch(f"Explanation first.\n{diff}") == diff
    assert extract_patch("no patch here") == ""


def test_a_removed_line_starting_with_dashes_is_not_a_new_file_header():
    before = {"notes.md": "-- a\n++ b\nkeep\n"}
    after = {"notes.md": "keep\n", "tests/test_x.py": "def test_x():\n    pass\n"}
    patch = diff_files(before, after)
    sections = split_patch(patch)
    assert [sorted(section.paths) for section in sections] == [["notes.md"], ["tests/test_x.py"]]


def test_protected_paths_are_dropped_with_the_reason():
    files = {"pkg/a.py": "x = 1\n"}
    changed = {
        "pkg/a.py": "x = 2\n",
        "conftest.py": "",
        "pkg/tests/helper.py": "",
        "pytest.ini": "",
        "pkg/x.pth": "",
        "test_api.py": "",
    }
    filtered = filter_patch(diff_files(files, changed))
    assert filtered.kept == ("pkg/a.py",)
    assert "conftest.py (a test file)" in filtered.dropped
    assert "pkg/x.pth (interpreter or packaging metadata)" in filtered.dropped
    assert "pytest.ini (test configuration or an interpreter start-up file)" in filtered.dropped
    assert len(filtered.dropped) == 5


def test_a_rename_into_a_protected_path_is_dropped():
    patch = "diff --git a/pkg/a.py b/conftest.py\nsimilarity index 100%\nrename from pkg/a.py\nrename to conftest.py\n"
    assert filter_patch(patch).text == ""
