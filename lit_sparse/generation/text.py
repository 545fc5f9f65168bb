"""Token ids to text as they arrive: byte-level tokens can split a character, so text is
held back while it ends in an incomplete UTF-8 sequence."""

from __future__ import annotations

from tokenizers import Tokenizer

__all__ = ["TextStream"]

REPLACEMENT = "\ufffd"


class TextStream:
    """``push(id)`` returns the text that became complete, ``flush()`` the rest (no specials)."""

    def __init__(self, tokenizer: Tokenizer, hold_limit: int = 8):
        self.tokenizer, self.hold_limit = tokenizer, hold_limit
        self._pending: list[int] = []

    def push(self, token_id: int) -> str:
        self._pending.append(int(token_id))
        text = self.tokenizer.decode(self._pending, skip_special_tokens=True)
        if text.endswith(REPLACEMENT) and len(self._pending) < self.hold_limit:
            return ""  # a character's first bytes: wait for the rest
        self._pending = []
        return text

    def flush(self) -> str:
        text = self.tokenizer.decode(self._pending, skip_special_tokens=True)
        self._pending = []
        return text
