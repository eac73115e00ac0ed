"""An answer reader independent of every verifier kind: where a completion commits to one final
answer, and whether that answer has the reference's value.

Used by the too_hard diagnosis (engine/verifiers/diagnosis.py) to ask "did the model give the right
answer and the verifier refuse it?" with a reading that is not the verifier's own. It must not pay
hedges, so it reads a *committed* answer only:

- the source is the first of: ``\\boxed{}``, ``<answer>`` tags, an answer phrase ("the answer is",
  "Answer:", "final answer"), the last line (a bare value, or the last side of ``=``); a later source
  is never tried when an earlier one is present, so a completion cannot box 41 and end on 42;
- several boxes, tags or answer phrases that do not all say the same thing hedge;
- the answer must be one value as a whole: ``41 or 42``, ``41, 42``, a list of numbers, a range do not
  read as one number, and a last line that follows another bare value is a list, not an answer.

Values: numbers are compared exactly as fractions (``0.5``, ``1/2``, ``\\frac{1}{2}``, ``1,000``,
``-3``, a currency sign before and a unit word after; ``\\frac12`` without braces is not read), so no
tolerance pays a rounded answer; text answers are compared casefolded with whitespace collapsed; anything else is left
to the caller (diagnosis.py compares it through math-verify in its killable helper).
Standard library only.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from fractions import Fraction

if __package__:  # imported as engine.verifiers.answer_span
    from engine.verifiers import answer_value
    from engine.verifiers.text import boxed_spans, tag_spans
else:  # a sibling file of math_worker's helper script (python -I)
    import answer_value  # type: ignore[no-redef]
    from text import boxed_spans, tag_spans  # type: ignore[no-redef]

BOXED, ANSWER_TAG, PHRASE, LAST_LINE = "boxed", "answer_tag", "phrase", "last_line"
# Only the tail is read: a final answer is at the end, and no completion makes this slow.
TAIL_CHARS = 20_000


@dataclass(frozen=True)
class Span:
    """A completion's committed final answer.

    text: the answer as written (``completion[start:end]``, offsets into the whole completion);
    source: boxed, answer_tag, phrase or last_line; hedge: why it is not one committed answer, or "".
    """

    text: str
    start: int
    end: int
    source: str
    hedge: str = ""


_PHRASE = re.compile(
    r"(?:final\s+answer|\banswer)\s*(?:\bis\b|\bwould\s+be\b|\bwill\s+be\b|:|=)\s*:?\s*",
    re.IGNORECASE,
)
_SENTENCE_END = re.compile(r"\n|\.(?!\d)|;|!|\?")
_WRAPPERS = ("**", "__", "$$", "$", "\\(", "\\)", "\\[", "\\]", "`")
_MARKDOWN_LEAD = re.compile(r"\s*(?:#{1,6}\s*|>\s*|[-*]\s+)?")


def _trim(text: str, start: int, end: int) -> tuple[int, int]:
    """The region without surrounding blanks, markdown emphasis, math delimiters and final punctuation."""
    changed = True
    while changed and start < end:
        changed = False
        while start < end and text[start].isspace():
            start, changed = start + 1, True
        while end > start and (text[end - 1].isspace() or text[end - 1] in ".,;:!"):
            end, changed = end - 1, True
        for wrapper in _WRAPPERS:
            if text.startswith(wrapper, start) and start + len(wrapper) <= end:
                start, changed = start + len(wrapper), True
            if end - len(wrapper) >= start and text[end - len(wrapper) : end] == wrapper:
                end, changed = end - len(wrapper), True
    return start, end


def _same_texts(texts: list[str]) -> bool:
    """Whether several answers say the same thing: the same stated value, or the same text."""
    return len({_said(text) for text in texts}) <= 1


def _said(text: str) -> object:
    quantity = answer_value.read_statement(text).quantity
    return (quantity.number, quantity.percent, quantity.unit) if quantity else normal_text(text)


def _taken_back_at(text: str, region: tuple[int, int], source: str) -> bool:
    return _context_problem(text, Span("", *region, source)).startswith("negated")


def _from_regions(text: str, regions: list[tuple[int, int]], source: str, offset: int) -> Span:
    if len(regions) > 1:  # a box or answer taken back ("\\boxed{6} is wrong") is not one of the answers
        kept = [
            region for region in regions if not _context_problem(text, Span("", *region, source)).startswith("negated")
        ]
        regions = kept or regions[-1:]
    start, end = _trim(text, *regions[-1])
    hedge = "" if _same_texts([text[a:b] for a, b in regions]) else f"{len(regions)} {source} answers that differ"
    return Span(text[start:end], offset + start, offset + end, source, hedge)


# "42, as asked": after a comma, words with no number and no "or" are a remark, not another answer.
_REMARK = re.compile(r",\s+(?=[^\d]*$)(?![^\d]*\bor\b)", re.IGNORECASE)


def _phrase_regions(text: str) -> list[tuple[int, int]]:
    regions = []
    for match in _PHRASE.finditer(text):
        end = _SENTENCE_END.search(text, match.end())
        start, stop = _trim(text, match.end(), end.start() if end else len(text))
        remark = _REMARK.search(text, start, stop)
        if remark:
            start, stop = _trim(text, start, remark.start())
        if stop > start:
            regions.append((start, stop))
    return regions


_DISPLAY_CLOSER = re.compile(r"\s*(?:\\\]|\$\$)\s*")


def _last_line(text: str, offset: int) -> Span | None:
    lines = [(match.start(), match.end()) for match in re.finditer(r"[^\n]*\S[^\n]*", text)]
    while lines and _DISPLAY_CLOSER.fullmatch(text, *lines[-1]):  # "\\]" or "$$" ending a display
        lines.pop()
    if not lines:
        return None
    start, end = lines[-1]
    lead = _MARKDOWN_LEAD.match(text, start, end)  # matches the empty string at least
    start = lead.end() if lead else start
    equals = text.rfind("=", start, end)
    if equals >= 0:
        start = equals + 1
    start, end = _trim(text, start, end)
    if end <= start:
        return None
    hedge = ""
    if equals < 0 and len(lines) > 1:
        before_start, before_end = _trim(text, *lines[-2])
        if read_number(text[before_start:before_end]) is not None:
            hedge = "the last lines list several values"
    return Span(text[start:end], offset + start, offset + end, LAST_LINE, hedge)


def final_answer(completion: str) -> Span | None:
    """The committed final answer of a completion (the module's rules), or None when it states none."""
    offset = max(0, len(completion) - TAIL_CHARS)
    text = completion[offset:]
    for source, regions in (
        (BOXED, boxed_spans(text)),
        (ANSWER_TAG, tag_spans(text, "<answer>", "</answer>")),
        (PHRASE, _phrase_regions(text)),
    ):
        if regions:
            return _from_regions(text, regions, source, offset)
    return _last_line(text, offset)


# Numbers ----------------------------------------------------------------------------------------

_LATEX_NOISE = re.compile(r"\\[,!;: ]|\\left|\\right|\\displaystyle|\{,\}")
_TEXT_COMMAND = re.compile(r"\\(?:text|mathrm|textbf|mathbf|operatorname)\s*\{([^{}]*)\}")


def _clean(text: str) -> str:
    text = text.replace("\u2212", "-").replace("\\%", "%").replace("\\$", "$").replace("\\cdot", "*")
    text = _TEXT_COMMAND.sub(r" \1", _LATEX_NOISE.sub("", text))
    start, end = _trim(text, 0, len(text))
    return text[start:end]


def read_number(text: str) -> Fraction | None:
    """The number a text that is one number as a whole states, as written (``-1,000.5``, ``3/4``,
    ``\\frac{3}{4}``, ``$5``, ``12 km``, "eight"; ``45%`` reads 45), or None: ``41 or 42``, ``6*7``,
    ``1, 2`` and ``16/2`` are not one number (answer_value.py's rules)."""
    quantity = answer_value.read_quantity(text)
    return quantity.number if quantity else None


def normal_text(text: str) -> str:
    """Text for a comparison that ignores case, spacing, emphasis, ``\\text{}`` and final punctuation."""
    cleaned = _clean(text).strip("\"'“”‘’*_() ")
    return re.sub(r"\s+", " ", cleaned).casefold()


# Characters that make a reference read as math (a formula, a set, a LaTeX command) rather than words.
_MATH_MARKERS = re.compile(r"[\d\\^_{}()\[\]+*/=<>|]")
_SEVERAL = re.compile(r",|;|/|\bor\b|\band\b", re.IGNORECASE)


def is_text_answer(reference: str) -> bool:
    """Whether a reference is words ("Paris", "blue whale"), compared as text, not as math."""
    return bool(reference.strip()) and not _MATH_MARKERS.search(reference)


@dataclass(frozen=True)
class Match:
    """Whether a span has the reference's value: True, False, or None when only math can tell."""

    equal: bool | None
    how: str


def same_value(answer: str, reference: str, units: str = "strict") -> Match:
    """Compare a committed answer with a reference: as numbers when the reference is a number (the answer
    must commit to one value: answer_value.read_statement; ``units`` "strict" or "ignore"); as text when
    the reference is words (an answer joining several with ``or`` or ``,`` that the reference does not is
    never equal); otherwise ``Match(None, ...)``: the caller must compare them as math."""
    expected = answer_value.read_quantity(reference)
    if expected is not None:
        reading = answer_value.read_statement(answer)
        if reading.quantity is None:
            return Match(False, reading.refusal)
        equal = answer_value.same_quantity(reading.quantity, expected, units)
        return Match(equal, "equal as numbers" if equal else difference(reading.quantity, expected, units))
    if is_text_answer(reference):
        if _SEVERAL.search(answer) and not _SEVERAL.search(reference):
            return Match(False, "several answers")
        equal = normal_text(answer) == normal_text(reference)
        return Match(equal, "equal as text" if equal else "different text")
    return Match(None, "needs a math comparison")


def difference(answer: answer_value.Quantity, expected: answer_value.Quantity, units: str) -> str:
    """Why a stated quantity is not the reference's, for a verdict's detail."""
    if units == "strict" and answer.unit != expected.unit:
        unit, reference_unit = answer.unit or "no unit", expected.unit or "none"
        return f"{answer.shown()!r} is in {unit}, the reference {expected.shown()!r} in {reference_unit}"
    return f"{answer.shown()!r} is not {expected.shown()!r}"


# The sentence around a span: what comes before it in its clause can negate or hedge it.
_SENTENCE_BREAK = re.compile(r"[.!?](?=\s|$)|\n\s*\n")


def _context_problem(completion: str, span: Span) -> str:
    """Why the words around a committed answer take it back ("The answer is not \\boxed{8}", "maybe
    \\boxed{8}", "\\boxed{8} is wrong"), or ""."""
    before_start = max((match.end() for match in _SENTENCE_BREAK.finditer(completion, 0, span.start)), default=0)
    after = _SENTENCE_BREAK.search(completion, span.end)
    sentence = completion[before_start : after.end() if after else len(completion)]
    start, end = span.start - before_start, span.end - before_start
    if answer_value.negated(sentence, start, end):
        return "negated: the answer says what the value is not"
    if answer_value.hedged(sentence, start, end):
        return "hedged: the answer is not committed to one value"
    return ""


def taken_back(completion: str) -> str:
    """Why a completion's final answer, whatever its value, is not stated as the answer: its words
    negate or hedge it ("The answer is not \\boxed{x+1}"), or ""."""
    span = final_answer(completion)
    if span is None:
        return ""
    if answer_value.negated(span.text, len(span.text), len(span.text)):
        return "negated: the answer says what the value is not"
    problem = _context_problem(completion, span)
    return problem if problem.startswith("negated") else ""


def committed(completion: str) -> answer_value.Reading:
    """The value a completion's committed final answer states (final_answer's span read by
    answer_value.read_statement, with the words around it), or Reading(None, why not)."""
    span = final_answer(completion)
    if span is None:
        return answer_value.Reading(None, "no final answer")
    if span.hedge:
        return answer_value.Reading(None, f"hedged: {span.hedge}", span.text)
    problem = _context_problem(completion, span)
    reading = answer_value.Reading(None, problem) if problem else answer_value.read_statement(span.text)
    return dataclasses.replace(reading, stated=span.text)


def written_like(reference: str, span: Span, completion: str) -> str:
    """The completion with the reference answer written where its final answer was, in the answer's
    notation: inside math (a box, ``$``) as it is; in plain text a LaTeX reference goes between ``$``,
    as a model writes math in prose."""
    value = reference.strip()
    in_math = span.source == BOXED or completion[span.start - 1 : span.start] == "$"
    if not in_math and "\\" in value and not value.startswith("$"):
        value = f"${value}$"
    return completion[: span.start] + value + completion[span.end :]
