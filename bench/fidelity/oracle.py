"""The benchmark's own judge of what a turn says, independent of the service's anchor code.

A turn's *facts* are its content words. Ranked rarest-first over the session, the first is the
turn's *key fact*: the word a reader who asks about this turn most likely needs, and the one a
summary that claims to stand for the turn must keep. The definition is deliberately different
from the service's anchor derivation (no capitalisation or digit heuristics, no JSON handling):
the point is to check the service's coverage claims with something it does not know.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Iterable, Sequence

WORD = re.compile(r"[A-Za-z0-9]+(?:[._/:@-][A-Za-z0-9]+)*")

# The Glasgow Information Retrieval Group's English stop words, as scikit-learn ships them
# (sklearn.feature_extraction.text.ENGLISH_STOP_WORDS; "couldn't", "hasn't" and "no one" written
# without apostrophe or space), embedded so the oracle never changes with a library version.
GLASGOW_STOP_WORDS = """
a about above across after afterwards again against all almost alone along already also although
always am among amongst amount an and another any anyhow anyone anything anyway anywhere are
around as at back be became because become becomes becoming been before beforehand behind being
below beside besides between beyond bill both bottom but by call can cannot cant co con could
couldnt cry de describe detail do done down due during each eg eight either eleven else elsewhere
empty enough etc even ever every everyone everything everywhere except few fifteen fifty fill find
fire first five for former formerly forty found four from front full further get give go had has
hasnt have he hence her here hereafter hereby herein hereupon hers herself him himself his how
however hundred i ie if in inc indeed interest into is it its itself keep last latter latterly
least less ltd made many may me meanwhile might mill mine more moreover most mostly move much must
my myself name namely neither never nevertheless next nine no nobody none noone nor not nothing
now nowhere of off often on once one only onto or other others otherwise our ours ourselves out
over own part per perhaps please put rather re same see seem seemed seeming seems serious several
she should show side since sincere six sixty so some somehow someone something sometime sometimes
somewhere still such system take ten than that the their them themselves then thence there
thereafter thereby therefore therein thereupon these they thick thin third this those though three
through throughout thru thus to together too top toward towards twelve twenty two un under until
up upon us very via was we well were what whatever when whence whenever where whereafter whereas
whereby wherein whereupon wherever whether which while whither who whoever whole whom whose why
will with within without would yet you your yours yourself yourselves
"""

# Chat filler, and the halves of contractions the word pattern splits off ("didn't" -> "didn").
CHAT_FILLER = """
hi hello hey thanks thank ok okay please yes yeah yep sure great glad sorry welcome bye goodbye
don didn doesn isn aren wasn weren won wouldn couldn shouldn haven hasn hadn
"""

STOP_WORDS = frozenset((GLASGOW_STOP_WORDS + CHAT_FILLER).split())


def content_words(text: str) -> list[str]:
    """The turn's content words in order of appearance (with repeats)."""
    out = []
    for match in WORD.finditer(text):
        word = match.group(0).lower()
        # The length rule also drops numbers of fewer than 3 digits (quantities, list markers).
        if len(word) < 3 or word in STOP_WORDS:
            continue
        out.append(word)
    return out


def document_frequency(turn_words: Iterable[Sequence[str]]) -> Counter:
    """In how many turns of the session each word occurs."""
    df: Counter = Counter()
    for words in turn_words:
        df.update(set(words))
    return df


def ranked_facts(words: Sequence[str], df: Counter) -> list[str]:
    """Distinct words: rarest in the session first, then most repeated in the turn, then earliest."""
    counts = Counter(words)
    first_at: dict[str, int] = {}
    for i, w in enumerate(words):
        first_at.setdefault(w, i)
    return sorted(counts, key=lambda w: (df[w], -counts[w], first_at[w]))


def session_facts(texts: Sequence[str]) -> list[list[str]]:
    """Every turn's ranked facts (an empty list for a turn without content words)."""
    words = [content_words(t) for t in texts]
    df = document_frequency(words)
    return [ranked_facts(w, df) for w in words]


def fact_in(fact: str, summary_lower: str) -> bool:
    """The fact occurs case-insensitively with no letter or digit right before or after it."""
    pattern = r"(?<![A-Za-z0-9])" + re.escape(fact) + r"(?![A-Za-z0-9])"
    return re.search(pattern, summary_lower) is not None
