"""Repository-level coding tasks: a repository snapshot, an issue, hidden tests (docs/repository-tasks.md).

No Django here: ``grading.grade`` is the reward function a trainer can call, ``patches`` owns the
rule of what a patch may touch, ``snapshots`` builds, checks and finds snapshots.
"""
