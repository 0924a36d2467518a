"""Exact o200k_base token counts, without a download.

The service counts with o200k_base and flags a summary whose tokens reach the budget
(`at_budget`), so the client must count exactly the same way. Python's tiktoken fetches its BPE
file from the internet, which is blocked here; the Rust crate tiktoken-rs ships the very same
file (same SHA-256), so we build the encoding from that copy.
"""

from __future__ import annotations

import functools
import glob
import os

import tiktoken
from tiktoken.load import load_tiktoken_bpe

# The hash tiktoken itself pins for o200k_base (tiktoken_ext/openai_public.py).
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"

# Copied from tiktoken_ext/openai_public.py (o200k_base).
O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
O200K_SPECIAL = {"<|endoftext|>": 199999, "<|endofprompt|>": 200018}


def find_bpe_file() -> str:
    """`FIDELITY_O200K` if set, else the copy in the cargo registry."""
    explicit = os.environ.get("FIDELITY_O200K")
    if explicit:
        return explicit
    pattern = os.path.expanduser("~/.cargo/registry/src/*/tiktoken-rs-*/assets/o200k_base.tiktoken")
    found = sorted(glob.glob(pattern))
    if not found:
        raise FileNotFoundError(
            f"no o200k_base.tiktoken under {pattern}; set FIDELITY_O200K to a copy of the file"
        )
    return found[-1]


@functools.lru_cache(maxsize=1)
def encoding() -> tiktoken.Encoding:
    ranks = load_tiktoken_bpe(find_bpe_file(), expected_hash=O200K_SHA256)
    return tiktoken.Encoding(
        name="o200k_base",
        pat_str=O200K_PATTERN,
        mergeable_ranks=ranks,
        special_tokens=O200K_SPECIAL,
    )


def count(text: str) -> int:
    # disallowed_special=() : a turn that happens to contain "<|endoftext|>" is plain text.
    return len(encoding().encode(text, disallowed_special=()))


def head(text: str, max_tokens: int) -> str:
    """The text an LLM would have emitted before hitting `max_tokens`."""
    ids = encoding().encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    # errors="ignore": a cut inside a multi-byte character drops the partial character.
    return encoding().decode(ids[:max_tokens], errors="ignore")
