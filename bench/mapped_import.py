"""A GSM8K-sized dataset through a column mapping, against the same tasks in Passband's own format.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/passband .venv/bin/python bench/mapped_import.py --rows 1319

Writes a GSM8K-shaped Parquet file (a word problem in `question`, a worked `answer` ending in
`#### N`; 1,319 rows is the size of GSM8K's test split) and the same tasks as Passband JSONL, then
imports each through `manage.py import_tasks` into a fresh environment: the Parquet file with a
saved mapping (prompt "{question}", the text after ####, keys from the row number), the JSONL file
as it is (the baseline). With the reference-answer audits (the command's default: math-verify
per task) and without. Works in its own database (<name>_mapped_import), created afresh each run.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.database import django_in_fresh_database  # noqa: E402

NAMES = ("Janet", "Tobias", "Mia", "Ravi", "Lena", "Omar", "Grace", "Yuki")
ITEMS = ("eggs", "apples", "stamps", "marbles", "books", "cookies")


def gsm8k_row(index: int) -> dict:
    """A word problem of GSM8K's length (~250 characters) and a worked answer ending in #### N."""
    name, item = NAMES[index % len(NAMES)], ITEMS[index % len(ITEMS)]
    first, second, price = 10 + index % 37, 3 + index % 11, 2 + index % 5
    total = first + second
    question = (
        f"{name} collects {item}. On Monday {name} finds {first} {item}, and on Tuesday {second} more. "
        f"{name} sells every one of them at the market for ${price} each. "
        f"How many dollars does {name} make from the {item} found this week?"
    )
    answer = (
        f"{name} finds {first} + {second} = <<{first}+{second}={total}>>{total} {item}.\n"
        f"Selling them at ${price} each makes {total} * {price} = <<{total}*{price}={total * price}>>{total * price} "
        f"dollars.\n#### {total * price}"
    )
    return {"question": question, "answer": answer}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1319)
    args = parser.parse_args()
    django_in_fresh_database(suffix="_mapped_import")
    import pyarrow
    import pyarrow.parquet
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    from curation.import_mappings import import_mapping_save
    from curation.models import Task
    from curation.services import environment_create
    from engine.task_mapping import ColumnMapping

    user = get_user_model().objects.create_superuser("bench", "bench@example.invalid", "bench")
    rows = [gsm8k_row(index) for index in range(args.rows)]
    mapping = ColumnMapping(
        prompt="{question}",
        answer_column="answer",
        answer_extractor="after_hashes",
        key_column="#row",
        key_prefix="gsm8k/",
    )
    print("| file | read as | audits | rows | seconds | rows/s |")
    print("|---|---|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as folder:
        parquet_path, jsonl_path = Path(folder) / "gsm8k-test.parquet", Path(folder) / "gsm8k-test.jsonl"
        pyarrow.parquet.write_table(pyarrow.Table.from_pylist(rows), parquet_path)
        with open(jsonl_path, "w", encoding="utf-8") as stream:
            for number, row in enumerate(rows, start=1):
                answer = row["answer"].rsplit("####", 1)[1].strip()
                stream.write(json.dumps({"key": f"gsm8k/{number}", "prompt": row["question"], "answer": answer}) + "\n")
        # Warm up first (the math-verify helper process the audits use starts once), so neither row pays for it.
        warm_path = Path(folder) / "warm.jsonl"
        warm_path.write_text(
            "".join(json.dumps({"prompt": f"{i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(20))
        )
        environment_create(name="warm-up", domain="math", default_verifier={"kind": "math"})
        call_command("import_tasks", str(warm_path), environment="warm-up", owner="bench", stdout=io.StringIO())
        for audits in (True, False):
            for label, path, options in (
                ("Parquet", parquet_path, {"mapping": "gsm8k"}),
                ("Passband JSONL (baseline)", jsonl_path, {}),
            ):
                name = f"{'mapped' if options else 'native'}-{'audited' if audits else 'plain'}"
                environment = environment_create(name=name, domain="math", default_verifier={"kind": "math"})
                if options:
                    import_mapping_save(environment=environment, name="gsm8k", mapping=mapping, by=user)
                started = time.perf_counter()
                call_command(
                    "import_tasks",
                    str(path),
                    environment=name,
                    owner="bench",
                    no_audit=not audits,
                    stdout=io.StringIO(),
                    **options,
                )
                elapsed = time.perf_counter() - started
                assert Task.objects.filter(environment=environment).count() == args.rows
                how = "mapping: {question}, text after ####, row keys" if options else "as it is"
                print(
                    f"| {label}, {path.stat().st_size / 1e6:.2f} MB | {how} | {'yes' if audits else 'no'} "
                    f"| {args.rows:,} | {elapsed:.2f} | {args.rows / elapsed:,.0f} |",
                    flush=True,
                )
    print(f"load average: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
