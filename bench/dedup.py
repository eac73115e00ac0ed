"""Near-duplicate and contamination checks at 100,000 tasks: recall on planted paraphrases, false positives, time.

    .venv/bin/python bench/dedup.py --tasks 100000 --planted 1000 --embedded-distractors 2000

Builds `--tasks` synthetic tasks (word problems and coding tasks from 24 templates, random names,
objects and numbers), signs every one with MinHash (engine.similarity, as uploads do), and
plants `--planted` near-duplicates: paraphrase-like edits of corpus tasks (synonyms, clauses
reordered, words added or dropped; numbers kept). Then, as an upload of 1,000 tasks would, it
signs `--planted` paraphrases plus as many unrelated new tasks and searches the index for each.

Embeddings. The sentence model runs on the CPU at ~50-70 texts/s here, so embedding 100,000 texts
would take ~30 minutes. The model embeds, for real, every text whose embedding decides a result:
the planted originals, their paraphrases, the unrelated queries, and `--embedded-distractors`
other corpus tasks (same templates, other numbers and names: the hardest negatives). The other
corpus rows get random unit vectors, which cost the same to search (a matrix product does not
look at values) and sit far from everything (cosine ~ +-0.05), so embedding recall and false
positives are measured against a corpus of (planted + distractors) real vectors, while time and
memory are measured against the full index. `--embedded-distractors` raises that share.

Reported per method (MinHash alone, embedding alone, either: what Passband flags): recall (the
planted paraphrase flagged with its original as the neighbour), false-positive rate (an unrelated
task flagged), and the false positives the numbers rule prevents. Time per 1,000 uploads is split
into MinHash, embedding, index search and contamination check; the baseline in the same run is an
exact MinHash scan over every row (no LSH). Contamination: `--contamination` HumanEval prompts
copied with a framing sentence, and as many of them paraphrased, vs unrelated tasks.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

from engine import similarity  # noqa: E402

NAMES = "Maria Tom Aisha Kenji Lucia Omar Priya Jonas Mei Carlos Fatima Ivan Sara Diego Nora Ahmed Elena Felix Hana Leo Rosa Samir Yuki Zoe".split()
ITEMS = "apples pencils marbles stickers books cookies tickets coins shells stamps cards bottles boxes flowers candles buttons".split()
PLACES = "market school library bakery garden museum station harbour factory farm".split()
TEMPLATES = [
    "{a} has {x} {item}. {a} gives {y} of them to {b} and buys {z} more at the {place}. How many {item} does {a} have now?",
    "A train leaves the {place} at {x} km per hour. Another leaves {y} minutes later at {z} km per hour. After how many minutes does the second catch up?",
    "{a} reads {x} pages on Monday and {y} pages on Tuesday. The book has {z} pages. How many pages are left to read?",
    "The {place} sells {item} in packs of {x}. {a} needs {z} {item} for a party and already has {y}. How many packs must {a} buy?",
    "A rectangle is {x} metres long and {y} metres wide. A path {z} metres wide runs around it. What is the area of the path?",
    "{a} saves {x} dollars a week. {b} saves {y} dollars a week but starts with {z} dollars. After how many weeks do they have the same amount?",
    "Write a Python function that returns the {x}th Fibonacci number modulo {y}. It must run in under {z} milliseconds for large inputs.",
    "Write a function that takes a list of integers and returns the sum of the elements at indices divisible by {x}, ignoring values above {y} or below {z}.",
    "Implement a function that counts the words longer than {x} characters that contain the letter '{letter}' in the first {y} lines of a text of {z} lines.",
    "Given a grid of {x} rows and {y} columns, count the paths from the top-left to the bottom-right corner that avoid {z} blocked cells.",
    "A tank holds {x} litres. One pipe fills it at {y} litres per minute while a leak drains {z} litres per minute. How long until it is full?",
    "{a} and {b} share {x} {item} in the ratio {y}:{z}. How many {item} does {b} get?",
    "In a class of {x} students, {y} play football and {z} play chess; {w} play both. How many play neither?",
    "The price of a {item_single} rose by {x} percent and then fell by {y} percent. It now costs {z} dollars. What did it cost at first?",
    "{a} walks {x} km to the {place} at {y} km per hour and cycles back at {z} km per hour. What is the average speed for the round trip?",
    "Write a SQL query that lists customers who placed more than {x} orders in the last {y} days and spent over {z} dollars, sorted by total spend.",
    "A die is rolled {x} times. What is the probability of getting at least {y} sixes? Give the answer to {z} decimal places.",
    "Parse a log file where each line holds a timestamp and a status code; return the {x} most frequent codes seen between minute {y} and minute {z}.",
    "{a} plants {x} rows of {item} with {y} in each row. Birds eat {z} of them. How many are left?",
    "A recipe needs {x} grams of flour for {y} cookies. How much flour is needed for {z} cookies?",
    "Find the smallest positive integer that leaves remainder {x} when divided by {y} and remainder {w} when divided by {z}.",
    "A bus carries {x} passengers. At the {place}, {y} get off and {z} get on. How many passengers are on the bus now?",
    "Write a function that checks whether a string of brackets is balanced, allowing at most {x} levels of nesting, {y} bracket types and {z} characters.",
    "{a} buys {x} {item} at {y} cents each and pays with a {z} dollar note. How much change does {a} get?",
]
# Paraphrase edits: word swaps that keep the meaning, and fillers added or dropped.
SYNONYMS = {
    "has": "owns",
    "gives": "hands",
    "buys": "purchases",
    "many": "many",
    "now": "at this point",
    "leaves": "departs from",
    "Another": "A second train",
    "reads": "gets through",
    "left": "remaining",
    "sells": "offers",
    "needs": "requires",
    "must": "should",
    "metres": "meters",
    "runs": "goes",
    "saves": "puts aside",
    "starts": "begins",
    "returns": "gives back",
    "takes": "accepts",
    "counts": "tallies",
    "Given": "For",
    "holds": "contains",
    "share": "split",
    "rose": "went up",
    "fell": "dropped",
    "walks": "goes on foot",
    "cycles": "rides a bike",
    "lists": "returns",
    "rolled": "thrown",
    "probability": "chance",
    "Parse": "Read",
    "frequent": "common",
    "plants": "sows",
    "eat": "take",
    "recipe": "recipe card",
    "smallest": "least",
    "carries": "has",
    "checks": "tests",
    "pays": "settles",
    "change": "money back",
    "Write": "Create",
    "Implement": "Write",
    "function": "routine",
    "How": "Tell me how",
}
PREFIXES = ["", "Please solve: ", "Question: ", "Here is a problem. ", "Try this one. "]
SUFFIXES = ["", " Show your work.", " Explain briefly.", " Give only the final answer.", " Think step by step."]


def task_text(rng: random.Random, template: str | None = None) -> str:
    template = template or rng.choice(TEMPLATES)
    numbers = rng.sample(range(2, 1000), 4)
    item = rng.choice(ITEMS)
    return (
        rng.choice(PREFIXES)
        + template.format(
            a=rng.choice(NAMES),
            b=rng.choice(NAMES),
            item=item,
            item_single=item.rstrip("s"),
            place=rng.choice(PLACES),
            letter=rng.choice("aeiourst"),
            x=numbers[0],
            y=numbers[1],
            z=numbers[2],
            w=numbers[3],
        )
        + rng.choice(SUFFIXES)
    )


def paraphrase(rng: random.Random, text: str, *, heavy: bool = True) -> str:
    """Synonyms for words that have one (most when heavy, a third when light), sentences reordered (heavy,
    half the time), the opening and closing fillers changed; numbers kept."""
    share = 0.8 if heavy else 0.3
    for prefix in PREFIXES[1:]:
        text = text.removeprefix(prefix)
    for suffix in SUFFIXES[1:]:
        text = text.removesuffix(suffix)
    words = [SYNONYMS.get(word, word) if rng.random() < share else word for word in text.split(" ")]
    text = " ".join(words)
    sentences = [part.strip() for part in text.replace("? ", "?|").replace(". ", ".|").split("|") if part.strip()]
    if heavy and len(sentences) > 2 and rng.random() < 0.5:
        sentences[0], sentences[1] = sentences[1], sentences[0]
    return rng.choice(PREFIXES) + " ".join(sentences) + rng.choice(SUFFIXES)


def rate(count: int, seconds: float) -> str:
    return f"{count / seconds:,.0f}/s" if seconds else "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument(
        "--planted", type=int, default=1000, help="Paraphrases planted (and as many unrelated queries)."
    )
    parser.add_argument("--embedded-distractors", type=int, default=2000, help="Other corpus tasks embedded for real.")
    parser.add_argument(
        "--contamination", type=int, default=50, help="HumanEval items copied, and as many paraphrased."
    )
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    np_rng = np.random.default_rng(args.seed)
    jaccard_at, cosine_at = 0.6, 0.85  # Passband's defaults (PASSBAND_DUPLICATE_JACCARD / _COSINE)

    corpus = [task_text(rng) for _ in range(args.tasks)]
    planted_rows = rng.sample(range(args.tasks), args.planted)
    # The first half light edits, the second half heavy.
    paraphrases = [paraphrase(rng, corpus[row], heavy=i >= args.planted // 2) for i, row in enumerate(planted_rows)]
    unrelated = [task_text(rng) for _ in range(args.planted)]
    queries = paraphrases + unrelated

    started = time.perf_counter()
    signatures = np.stack([similarity.minhash(text) for text in corpus])
    minhash_corpus_s = time.perf_counter() - started
    numbers = np.array([similarity.numbers_key(text) for text in corpus], dtype=np.int64)

    # Real embeddings where they decide a result; random unit vectors elsewhere (see the docstring).
    chosen = set(planted_rows)
    others = [row for row in range(args.tasks) if row not in chosen]
    distractor_rows = rng.sample(others, min(args.embedded_distractors, len(others)))
    real_rows = planted_rows + distractor_rows
    started = time.perf_counter()
    similarity.embed(["warm up"])
    load_s = time.perf_counter() - started
    started = time.perf_counter()
    real_vectors = similarity.embed([corpus[row] for row in real_rows])
    embed_corpus_s = time.perf_counter() - started
    embeddings = np_rng.standard_normal((args.tasks, similarity.EMBEDDING_DIMENSIONS)).astype(np.float32)
    embeddings /= np.linalg.norm(embeddings, axis=1, keepdims=True)
    embeddings[real_rows] = real_vectors

    index = similarity.SimilarityIndex()
    started = time.perf_counter()
    index.add(
        ids=range(args.tasks), groups=range(args.tasks), numbers=numbers, signatures=signatures, embeddings=embeddings
    )
    index.nearest(signatures=signatures[:1], embeddings=embeddings[:1], groups=[-1], numbers=numbers[:1])  # builds LSH
    build_s = time.perf_counter() - started

    # One upload of len(queries) tasks, step by step.
    started = time.perf_counter()
    query_signatures = np.stack([similarity.minhash(text) for text in queries])
    minhash_s = time.perf_counter() - started
    query_numbers = np.array([similarity.numbers_key(text) for text in queries], dtype=np.int64)
    started = time.perf_counter()
    query_embeddings = similarity.embed(queries)
    embed_s = time.perf_counter() - started
    started = time.perf_counter()
    groups = list(range(args.tasks, args.tasks + len(queries)))
    pairs = index.nearest(
        signatures=query_signatures, embeddings=query_embeddings, groups=groups, numbers=query_numbers
    )
    search_s = time.perf_counter() - started
    # Without the numbers rule: every query's numbers key made to match everything (hard negatives let in).
    loose = similarity.SimilarityIndex()
    loose.add(
        ids=range(args.tasks),
        groups=range(args.tasks),
        numbers=np.zeros(args.tasks, dtype=np.int64),
        signatures=signatures,
        embeddings=embeddings,
    )
    loose_pairs = loose.nearest(
        signatures=query_signatures,
        embeddings=query_embeddings,
        groups=groups,
        numbers=np.zeros(len(queries), dtype=np.int64),
    )

    started = time.perf_counter()
    exact = []  # (best row, its Jaccard) per query
    for signature, query_number in zip(query_signatures, query_numbers):
        scores = np.mean(signatures == signature, axis=1)
        scores[numbers != query_number] = -1.0  # the numbers rule, as the index applies it
        best = int(np.argmax(scores))
        exact.append((best, float(scores[best])))
    exact_scan_s = time.perf_counter() - started

    started = time.perf_counter()
    reference = similarity.reference_corpus()
    reference_s = time.perf_counter() - started  # built once per process (cached for the table below)
    started = time.perf_counter()
    for text, vector in zip(queries, query_embeddings):
        reference.match(text=text, embedding=vector)
    contamination_s = time.perf_counter() - started

    def flagged(pair, method: str) -> similarity.Neighbour | None:
        by_wording, by_meaning = pair
        if method == "minhash":
            return by_wording if by_wording is not None and by_wording.jaccard >= jaccard_at else None
        if method == "embedding":
            return by_meaning if by_meaning is not None and by_meaning.cosine >= cosine_at else None
        return similarity.best_neighbour(pair, jaccard_at=jaccard_at, cosine_at=cosine_at)

    n = args.planted
    print(
        f"\n{args.tasks:,} tasks, {n:,} planted paraphrases, {n:,} unrelated queries; {len(real_rows):,} corpus rows embedded for real"
    )
    print(f"example: {corpus[planted_rows[0]]!r}\n      -> {paraphrases[0]!r}")
    print(
        "\n| method | recall (neighbour = the original) | flagged at all | false positives (unrelated) | false positives without the numbers rule |"
    )
    print("|---|---|---|---|---|")
    for method in ("minhash", "embedding", "combined"):
        hits = [flagged(pair, method) for pair in pairs]
        recall = sum(hit is not None and hit.id == row for hit, row in zip(hits[:n], planted_rows)) / n
        any_flag = sum(hit is not None for hit in hits[:n]) / n
        false = sum(hit is not None for hit in hits[n:]) / n
        loose_false = sum(flagged(pair, method) is not None for pair in loose_pairs[n:]) / n
        found = [hit is not None and hit.id == row for hit, row in zip(hits[:n], planted_rows)]
        light, heavy = found[: n // 2], found[n // 2 :]
        print(
            f"| {method} | {recall:.1%} (light {sum(light) / len(light):.1%}, heavy {sum(heavy) / len(heavy):.1%}) "
            f"| {any_flag:.1%} | {false:.2%} | {loose_false:.2%} |"
        )
    exact_recall = sum(best == row and score >= jaccard_at for (best, score), row in zip(exact[:n], planted_rows)) / n
    print(f"| baseline: exact MinHash scan of every row (no LSH) | {exact_recall:.1%} | | | |")
    # Real distinct tasks as hard negatives: each HumanEval problem's nearest other problem (the numbers rule
    # applied), which a threshold must not call a duplicate.
    reference = similarity.reference_corpus()
    items = reference.items
    item_index = similarity.SimilarityIndex()
    item_signatures = np.stack([similarity.minhash(item.text) for item in items])
    item_numbers = [similarity.numbers_key(item.text) for item in items]
    item_index.add(
        ids=range(len(items)),
        groups=range(len(items)),
        numbers=item_numbers,
        signatures=item_signatures,
        embeddings=reference.embeddings,
    )
    item_pairs = item_index.nearest(
        signatures=item_signatures, embeddings=reference.embeddings, groups=range(len(items)), numbers=item_numbers
    )
    print(
        f"\n| embedding cosine threshold (MinHash at {jaccard_at}) | recall | false positives (unrelated) "
        f"| {len(items)} distinct HumanEval problems flagged as another's duplicate |\n|---|---|---|---|"
    )
    for threshold in (0.8, 0.85, 0.9, 0.95):
        hits = [similarity.best_neighbour(pair, jaccard_at=jaccard_at, cosine_at=threshold) for pair in pairs]
        recall = sum(hit is not None and hit.id == row for hit, row in zip(hits[:n], planted_rows)) / n
        distinct = sum(
            similarity.best_neighbour(pair, jaccard_at=jaccard_at, cosine_at=threshold) is not None
            for pair in item_pairs
        )
        print(f"| {threshold} | {recall:.1%} | {sum(hit is not None for hit in hits[n:]) / n:.2%} | {distinct} |")

    per_1000 = 1000 / len(queries)
    print(f"\n| step, per 1,000 uploads against {args.tasks:,} | seconds |\n|---|---|")
    for label, seconds in (
        ("MinHash signatures", minhash_s),
        ("embeddings (sentence model, CPU)", embed_s),
        ("index search (LSH MinHash + exact embedding scan)", search_s),
        ("contamination check (13-grams + embeddings, 164 HumanEval items)", contamination_s),
    ):
        print(f"| {label} | {seconds * per_1000:.2f} |")
    total = (minhash_s + embed_s + search_s + contamination_s) * per_1000
    print(f"| **total** | **{total:.2f}** |")
    print(f"| baseline: exact MinHash scan of every row (search only) | {exact_scan_s * per_1000:.2f} |")
    print(
        f"\nindex: {index.nbytes / 2**20:.1f} MiB in numpy for {args.tasks:,} rows; build {build_s:.1f} s; "
        f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB (both indexes, the corpus text, the model)"
    )
    print(
        f"rates: MinHash {rate(args.tasks, minhash_corpus_s)}, embeddings {rate(len(real_rows), embed_corpus_s)} "
        f"(model load {load_s:.1f} s), reference corpus build {reference_s:.1f} s"
    )

    # Contamination: HumanEval prompts copied (with a framing line) and paraphrased, vs unrelated tasks.
    items = similarity.humaneval_items()
    picked = rng.sample(items, min(args.contamination, len(items)))
    copies = ["Solve the following problem in Python.\n\n" + item.text for item in picked]
    reworded = [paraphrase(rng, item.text) for item in picked]
    clean = unrelated[: len(picked)]
    vectors = similarity.embed(copies + reworded + clean)
    thresholds = dict(overlap_at=0.2, cosine_at=0.92)  # PASSBAND_CONTAMINATION_OVERLAP / _COSINE
    print("\n| contamination probe | flagged | matched the right item |\n|---|---|---|")
    for label, texts, offset, truth in (
        ("HumanEval prompt copied", copies, 0, picked),
        ("HumanEval prompt paraphrased", reworded, len(picked), picked),
        ("unrelated synthetic task", clean, 2 * len(picked), None),
    ):
        matches = [reference.match(text=text, embedding=vectors[offset + i]) for i, text in enumerate(texts)]
        hit = [similarity.is_contaminated(match, **thresholds) for match in matches]
        right = sum(h and truth is not None and m.item == truth[i] for i, (h, m) in enumerate(zip(hit, matches)))
        print(f"| {label} | {sum(hit)}/{len(texts)} | {right if truth else '-'} |")


if __name__ == "__main__":
    main()
