"""An OpenAI Agents SDK session whose history is the gatekeeper's raw log.

``Runner.run(agent, input, session=GatekeeperSession(...))`` appends every item the SDK adds to
the gatekeeper, and answers ``get_items`` with the *verified* working context: a summary the
gatekeeper accepted stands for the turns it really covers, every other turn comes back as the
exact item the SDK added. When the context outgrows ``compact_at`` and a summarizer was given,
the session asks ``compaction-plan`` for a range, has the summarizer write it under the plan's
anchors, and proposes it; the gatekeeper persists only what the summary covers.

How an item is stored (one item, one turn):

* ``content`` is readable text, so the service's anchors, search and the summarizer see what a
  person would: a message's text, a function call as ``name(arguments)``, a tool output as the
  output itself. Roles: user / assistant / system messages keep their role (``developer`` is
  ``system``), ``*_output`` items are ``tool``, everything else the model emits (function calls,
  reasoning, ...) is ``assistant``.
* ``external_id`` is ``oa1:`` + the item's JSON with that text replaced by ``"\\u0000"``: a template
  of at most 256 characters from which the exact item comes back (key order included; every
  encoding is decoded and compared before it is sent). An item that has no single text slot or
  whose template is longer (encrypted reasoning, images, multi-part messages) is stored as its
  JSON with ``external_id`` ``oa1:json``: still exact, only less readable, and its anchors are then
  JSON values (ids first) that a summary is unlikely to keep, so it tends to stay in the raw log.
* Turn ids are explicit (the session tracks the next one), and each append carries an
  ``Idempotency-Key`` made of the conversation, the first id and a digest of the batch: a retried
  ``add_items`` whose first attempt landed is a replay, applied once.

The log is append-only, so:

* ``pop_item`` appends a pinned ``system`` marker (``oa1:pop:<id>``) that withdraws the newest
  live item; ``get_items`` hides withdrawn turns and markers, and the summarizer never sees them.
  Pinned, the marker is never summarized away, so every process sees the withdrawal. A turn a
  summary already covers can be withdrawn, but the summary still says what it said.
* ``clear_session`` starts a new *generation*: the conversation ``<session_id>:gen<N>``, whose
  turn 0 is a pinned marker (``oa1:cleared``). A session finds the newest generation the first
  time it is used; the old history stays searchable in the old conversation.

``get_items`` maps the context back: a summary is one ``note_role`` message (``Summary of
earlier turns (0-13) ...``), a verbatim turn its exact item, a stub (a turn left out to fit
``max_tokens``) a note with its preview, anchors and recall path. A call and its output are
never split (see ``_view.unsplit``); ``limit`` then takes the last N items as they are. Tokens
are the service's (tiktoken ``o200k_base``): turns are appended without ``tokens``, and
``compact_at`` is compared with the tokens of what ``get_items`` would return without a budget.

Limits: the turn cache is per process and unbounded (turns never change, so it is never stale);
a session that found its generation before another process cleared it keeps the old one until it
is created again; with reasoning models, an item whose reasoning item a summary stands for is
sent without it, which the Responses API may refuse for items it stored itself.

The package: ``_encoding`` (item <-> turn, roles, ``external_id`` templates, markers), ``_view``
(working context -> SDK items, call/output pairing), ``_session`` (the session protocol, appends,
pop/clear, compaction).
"""

# The labels and the decoded turn are importable from here too (tests read the raw log with them),
# as explicit re-exports outside ``__all__``.
try:
    import agents  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on what is installed
    raise ImportError(
        "this integration needs the [openai-agents] extra: "
        "pip install 'gatekeeper-client[openai-agents]'"
    ) from e

from ._encoding import EXT as EXT
from ._encoding import EXT_CLEARED as EXT_CLEARED
from ._encoding import EXT_JSON as EXT_JSON
from ._encoding import EXT_POP as EXT_POP
from ._encoding import Entry as Entry
from ._encoding import decode_turn, encode_item
from ._session import GatekeeperSession, Summarizer

__all__ = ["GatekeeperSession", "Summarizer", "decode_turn", "encode_item"]
