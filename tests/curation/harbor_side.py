"""Run by Harbor's own Python (scripts/side-env.sh), never imported by Passband's suite.

    python harbor_side.py FOLDER...

For each Harbor task folder: Harbor's task model (`harbor.models.task.task.Task`, what `harbor run` loads
a task with: task.toml through `TaskConfig`, instruction.md, the tests' presence), `Task.is_valid_dir`, and
Harbor's static checker (`harbor.lint.task.lint_task` with the rules `harbor lint` selects by default). Harbor runs the verifier
only inside a container (Docker or a cloud sandbox), so that part is not done here.

Prints one JSON object: {folder name: {"name", "instruction", "metadata", "verifier_timeout", "memory_mb",
"test_script", "solve_script", "valid", "findings": [[rule, file, message], ...]}}.
"""

import json
import sys
from pathlib import Path

from harbor.lint.models import DEFAULT_RULES
from harbor.lint.task import lint_task
from harbor.models.task.task import Task

found = {}
for argument in sys.argv[1:]:
    folder = Path(argument)
    task = Task(folder)
    found[folder.name] = {
        "name": task.name,
        "instruction": task.instruction,
        "metadata": task.config.metadata,
        "verifier_timeout": task.config.verifier.timeout_sec,
        "memory_mb": task.config.environment.memory_mb,
        "test_script": task.paths.discovered_test_path.relative_to(task.paths.task_dir).as_posix(),
        "solve_script": task.paths.discovered_solve_path.relative_to(task.paths.task_dir).as_posix(),
        "valid": Task.is_valid_dir(folder),
        "findings": [
            [finding.rule.value, Path(finding.path).relative_to(folder.resolve()).as_posix(), finding.message]
            for finding in lint_task(folder, selected_rules=set(DEFAULT_RULES))
        ],
    }
print(json.dumps(found))
