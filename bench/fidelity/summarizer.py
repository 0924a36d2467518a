"""An extractive LexRank summarizer (sumy) filled up to a token budget.

sumy ranks the fragments of a range; this module only cuts the range into fragments and picks
ranked fragments until the budget is reached. sumy's own tokenizer needs NLTK's punkt data,
which cannot be downloaded here, so fragments and words come from the small regex tokenizer
below (sumy asks its tokenizer for nothing but `to_sentences` and `to_words`).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy
from sumy.models.dom import ObjectDocumentModel, Paragraph, Sentence
from sumy.nlp.stemmers import Stemmer
from sumy.summarizers.lex_rank import LexRankSummarizer
from sumy.utils import get_stop_words

import tokens

# Tool output is one long JSON line; cut long pieces at ", " so a fragment is a field or two,
# short enough that a 1,024-token summary can hold a few dozen of them.
MAX_FRAGMENT_CHARS = 200
SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")
WORDS = re.compile(r"[^\W\d_](?:[^\W\d_]|['-])*|\d[\w./:-]*", re.UNICODE)
MID_CLAUSE_END = re.compile(r"[\w,;:\-]$")


@dataclass(frozen=True)
class Fragment:
    turn: int
    role: str
    text: str


@dataclass(frozen=True)
class RangeTurn:
    id: int
    role: str
    text: str


class RegexTokenizer:
    """Words for sumy's similarity measure; sentences are cut by `fragments` beforehand."""

    language = "english"

    def to_sentences(self, paragraph: str) -> tuple[str, ...]:
        return (paragraph,)

    def to_words(self, sentence: str) -> tuple[str, ...]:
        return tuple(WORDS.findall(sentence))


def split_long(piece: str, limit: int = MAX_FRAGMENT_CHARS) -> list[str]:
    """Pieces longer than `limit` cut at ", " into chunks of at most about `limit` characters."""
    if len(piece) <= limit:
        return [piece]
    chunks, current = [], ""
    for part in piece.split(", "):
        candidate = f"{current}, {part}" if current else part
        if current and len(candidate) > limit:
            chunks.append(current)
            current = part
        else:
            current = candidate
    if current:
        chunks.append(current)
    return chunks


def fragments(turns: Iterable[RangeTurn], limit: int = MAX_FRAGMENT_CHARS) -> list[Fragment]:
    out = []
    for turn in turns:
        for sentence in SENTENCE_END.split(turn.text):
            for piece in split_long(sentence.strip(), limit):
                if WORDS.search(piece):
                    out.append(Fragment(turn.id, turn.role, piece))
    return out


class Summarizer:
    def __init__(self) -> None:
        self._tokenizer = RegexTokenizer()
        self._lexrank = LexRankSummarizer(Stemmer("english"))  # Snowball: no NLTK data needed
        self._lexrank.stop_words = get_stop_words("english")  # shipped inside the sumy wheel

    def ranked(self, frags: Sequence[Fragment]) -> list[int]:
        """Indices of `frags`, most central first (LexRank)."""
        if len(frags) < 2:
            return list(range(len(frags)))
        sentences = [Sentence(f.text, self._tokenizer) for f in frags]
        document = ObjectDocumentModel([Paragraph(sentences)])
        infos: list = []

        # sumy hands its rating-sorted SentenceInfo list to a callable `sentences_count`:
        # keep the ranking and let the budget, not a sentence count, decide what goes in.
        def keep_ranking(ranked_infos):
            infos.extend(ranked_infos)
            return ranked_infos

        with numpy.errstate(invalid="ignore", divide="ignore"):
            self._lexrank(document, keep_ranking)
        if any(math.isnan(info.rating) for info in infos):
            # No two fragments share a word (an all-zero similarity graph): LexRank has no
            # opinion, so the range's own order stands.
            return list(range(len(frags)))
        return [info.order for info in infos]

    def fill(self, frags: Sequence[Fragment], priority: Sequence[int], budget: int) -> str:
        """Fragments taken in `priority` order while the rendered summary stays under `budget`
        tokens (strictly: the service flags a summary that reaches its budget), in range order."""
        return self.fill_groups(frags, [[i] for i in priority], budget)

    def fill_groups(self, frags: Sequence[Fragment], groups: Sequence[Sequence[int]], budget: int) -> str:
        """Like `fill`, each group taken whole or not at all."""
        chosen: set[int] = set()
        for group in groups:
            if sum(tokens.count(frags[i].text) for i in group) >= budget:
                continue
            trial = render([frags[j] for j in sorted(chosen | set(group))])
            if tokens.count(trial) < budget:
                chosen.update(group)
        return render([frags[j] for j in sorted(chosen)])


def render(selected: Sequence[Fragment]) -> str:
    """`role: text` lines, one per turn, each ending as a complete sentence."""
    lines: list[str] = []
    last_turn = None
    for frag in selected:
        text = complete(frag.text)
        if frag.turn == last_turn:
            lines[-1] += " " + text
        else:
            lines.append(f"{frag.role}: {text}")
            last_turn = frag.turn
    return "\n".join(lines)


def complete(text: str) -> str:
    """A fragment closed as a sentence: no trailing comma or bare word for a reader (or the
    service's `mid_clause` tell) to take for a cut."""
    text = text.rstrip().rstrip(",;:-").rstrip()
    return text + "." if MID_CLAUSE_END.search(text) else text




@dataclass(frozen=True)
class Summary:
    text: str
    finish_reason: str  # "stop", or "length" when the output was cut at the budget


def naive(s: Summarizer, turns: Sequence[RangeTurn], budget: int) -> Summary:
    """A summarizer that ignores its budget and is cut off by it, as an LLM hitting max_tokens.

    It writes what it wants (the most central fragments, about a fifth of the input, the
    seed's compression floor), in range order, and the output stops after `budget` tokens: the
    end of the range is what gets lost, mid-sentence.
    """
    frags = fragments(turns)
    wanted_tokens = max(budget, sum(tokens.count(t.text) for t in turns) // 5)
    wanted = s.fill(frags, s.ranked(frags), wanted_tokens)
    cut = tokens.head(wanted, budget)
    return Summary(cut, "length" if cut != wanted else "stop")


def planned(s: Summarizer, turns: Sequence[RangeTurn], budget: int) -> Summary:
    """The most central fragments that fit under the budget, each a complete sentence."""
    frags = fragments(turns)
    return Summary(s.fill(frags, s.ranked(frags), budget), "stop")


def anchored(
    s: Summarizer, turns: Sequence[RangeTurn], budget: int, anchors: dict[int, list[str]]
) -> Summary:
    """Like `planned`, but every turn's anchors are kept first, as cheaply as its text allows.

    The service covers a turn only when all its anchors are in the summary, so for each turn this
    takes the fewest of its own fragments that carry all of them (greedy set cover), turns whose
    anchors cost the fewest tokens first, so the budget covers as many turns as it can; each
    turn's fragments go in whole or not at all. LexRank then fills what is left of the budget.
    """
    frags = fragments(turns)
    covers = []
    for turn in turns:
        own = [i for i, f in enumerate(frags) if f.turn == turn.id]
        cover = cheapest_cover(frags, own, anchors.get(turn.id, []))
        if cover:
            covers.append((sum(tokens.count(frags[i].text) for i in cover), turn.id, cover))
    covers.sort()
    groups = [cover for _, _, cover in covers]
    taken = {i for group in groups for i in group}
    groups += [[i] for i in s.ranked(frags) if i not in taken]
    return Summary(s.fill_groups(frags, groups, budget), "stop")


def cheapest_cover(frags: Sequence[Fragment], own: Sequence[int], wanted: Sequence[str]) -> list[int]:
    """Fragments of `own` that together carry every anchor of `wanted` (most anchors per token
    first), or nothing when some anchor is in none of them."""
    missing = set(wanted)
    cover: list[int] = []
    while missing:
        best = max(
            own,
            key=lambda i: (len({a for a in missing if has_anchor(frags[i].text, a)}), -len(frags[i].text)),
            default=None,
        )
        gained = {a for a in missing if best is not None and has_anchor(frags[best].text, a)}
        if not gained:
            return []
        cover.append(best)
        missing -= gained
    return sorted(cover)


def has_anchor(text: str, anchor: str) -> bool:
    """Case-insensitive, at word boundaries (close to the service's rule, which decides)."""
    pattern = r"(?<![^\W_])" + re.escape(anchor.casefold()) + r"(?![^\W_])"
    return re.search(pattern, text.casefold()) is not None
