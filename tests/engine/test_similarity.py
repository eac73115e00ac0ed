"""engine.similarity without Django or the model: normalization, MinHash, the numbers rule, the index, 13-grams."""

import numpy as np

from engine import similarity


def unit(vector) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float32)
    return vector / np.linalg.norm(vector)


def test_normalize_folds_case_width_and_punctuation():
    assert similarity.normalize("  ＷＨＡＴ is 2+2?!\n\tSay  it. ") == "what is 2 2 say it"


def test_prompt_text_is_what_the_task_asks_without_a_shared_system_prompt():
    system = {"role": "system", "content": "You are the back-office assistant. Use the tools."}
    asked = [{"role": "user", "content": "Set deal #5 to won."}, {"role": "assistant", "content": "Done."}]
    assert similarity.prompt_text([system, *asked]) == "Set deal #5 to won.\nDone."
    assert similarity.prompt_text([system]) == system["content"]  # nothing else: the system prompt is the task
    assert similarity.prompt_text("What is 2 + 2?") == "What is 2 + 2?"


def test_minhash_estimates_jaccard_and_round_trips_through_bytes():
    text = "A train leaves the station at 3 pm travelling at 60 miles per hour."
    same = similarity.minhash(text.upper() + "!!")
    other = similarity.minhash("Write a function that reverses a linked list in place.")
    signature = similarity.minhash(text)
    assert np.array_equal(signature, same)  # normalization makes these one text
    assert np.mean(signature == other) < 0.1
    assert np.array_equal(similarity.minhash_from_bytes(similarity.minhash_bytes(signature)), signature)
    assert len(similarity.minhash_bytes(signature)) == 4 * similarity.NUM_PERM


def test_numbers_key_ignores_order_but_not_values():
    key = similarity.numbers_key
    assert key("Add 17 and 25.") == key("Take 25, then add 17.")
    assert key("Add 17 and 25.") != key("Add 18 and 25.")
    assert key("no numbers") == key("still none")


def test_numbers_key_tells_operations_apart_but_not_their_spelling():
    key = similarity.numbers_key
    assert key("What is 2 + 6?") != key("What is 6 times 2?") != key("What is 6 - 2?")
    assert key("What is 2 + 6?") == key("What is 6 plus 2?")
    assert key("What is 9 times 8?") == key("Compute 8 × 9.") == key("What is 9*8?")
    assert key("What is 12 / 4?") == key("What is 12 divided by 4?")
    assert key("It costs $1,000 and 2.5 kg.") == key("It costs $1000 and 2.5 kg.") != key("It costs $1,001 and 2.5 kg.")
    assert key("Count step-by-step to 10 in 2 ways.") == key("Count step by step to 10 in 2 ways.")


def _index(texts, vectors, groups=None):
    index = similarity.SimilarityIndex()
    index.add(
        ids=[100 + i for i in range(len(texts))],
        groups=groups or list(range(len(texts))),
        numbers=[similarity.numbers_key(text) for text in texts],
        signatures=np.stack([similarity.minhash(text) for text in texts]),
        embeddings=np.stack(vectors),
    )
    return index


def test_index_finds_the_wording_and_the_meaning_neighbour_within_the_same_numbers():
    texts = [
        "Maria has 12 apples and gives 4 to her brother. How many apples are left?",
        "Write a function that returns the 10th prime number.",
        "Maria has 13 apples and gives 4 to her brother. How many apples are left?",
    ]
    index = _index(
        texts, [unit([1, 0, 0, 0] + [0] * 380), unit([0, 1, 0, 0] + [0] * 380), unit([1, 0, 0, 0] + [0] * 380)]
    )
    query = "maria has 12 apples, and gives 4 to her brother: how many apples are left"
    ((by_wording, by_meaning),) = index.nearest(
        signatures=similarity.minhash(query)[None, :],
        embeddings=unit([0.9, 0.1, 0, 0] + [0] * 380)[None, :],
        groups=[-1],
        numbers=[similarity.numbers_key(query)],
    )
    assert by_wording.id == 100 and by_wording.jaccard > 0.8
    assert by_meaning.id == 100 and by_meaning.cosine > 0.9  # 102 is as close in meaning, but its numbers differ
    assert similarity.best_neighbour((by_wording, by_meaning), jaccard_at=0.6, cosine_at=0.99).id == 100


def test_index_skips_the_query_group_and_returns_none_on_an_empty_index():
    texts = ["Add 1 and 2.", "Add 1 and 2 please."]
    index = _index(texts, [unit([1] + [0] * 383)] * 2, groups=[7, 7])
    ((by_wording, by_meaning),) = index.nearest(
        signatures=similarity.minhash(texts[0])[None, :],
        embeddings=unit([1] + [0] * 383)[None, :],
        groups=[7],
        numbers=[similarity.numbers_key(texts[0])],
    )
    assert by_wording is None and by_meaning is None
    empty = similarity.SimilarityIndex()
    assert empty.nearest(signatures=np.zeros((1, 128)), embeddings=np.zeros((1, 384)), groups=[1], numbers=[0]) == [
        (None, None)
    ]


def test_thirteen_gram_overlap_names_the_item():
    items = [
        similarity.ReferenceItem(
            "Bench",
            "B/1",
            "def add(a, b):\n    '''Return the sum of a and b, two integers given by the caller of this function.'''",
        ),
        similarity.ReferenceItem(
            "Bench", "B/2", "Count the vowels in a string and return the count as an integer value please."
        ),
    ]
    corpus = similarity.ReferenceCorpus.build(items, embeddings=np.eye(2, 384, dtype=np.float32))
    copied = "Solve this: def add(a, b): Return the sum of a and b, two integers given by the caller of this function."
    match = corpus.match(text=copied, embedding=np.eye(1, 384, 1, dtype=np.float32)[0])
    assert match.item.item_id == "B/1" and match.shared_ngrams > 0 and match.overlap > 0.5
    assert similarity.is_contaminated(match, overlap_at=0.2, cosine_at=0.99)
    unrelated = corpus.match(
        text="What is the capital of France, and how many people live there today?", embedding=np.zeros(384)
    )
    assert unrelated.shared_ngrams == 0 and not similarity.is_contaminated(unrelated, overlap_at=0.2, cosine_at=0.99)
    # The whole item pasted into a task five times its length: most of the item is copied.
    padded = (
        copied
        + " "
        + " ".join(f"Then explain step {n} of your plan in plain words for the reader." for n in "abcdefgh")
    )
    diluted = corpus.match(text=padded, embedding=np.zeros(384))
    assert diluted.shared_ngrams / diluted.task_ngrams < 0.2 and diluted.overlap > 0.5
    assert similarity.is_contaminated(diluted, overlap_at=0.2, cosine_at=0.99)
