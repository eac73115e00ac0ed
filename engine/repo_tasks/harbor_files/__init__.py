"""Files an exported Harbor folder carries (its grading script and the plain-process sandbox stand-in).

They are read as text by ``engine.repo_tasks.harbor`` and written into the folder; nothing imports them here.
This file makes the folder a package so the wheel ships them with the engine."""
