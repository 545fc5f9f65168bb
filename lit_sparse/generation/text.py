"""Token ids to text as they arrive. A decoder reads a token's neighbours (sentencepiece drops a
leading space at the start, byte-level tokens can split a character), so each token is decoded
beside the few before it, and text ending in an incomplete character is held back."""

from __future__ import annotations

from collections.abc import Sequence

REPLACEMENT = "\ufffd"


class TextStream:
    """``push(id)`` returns the text that became complete, ``flush()`` what is held back, and
    ``text()`` the whole continuation; a step costs the same at any length.

    Args:
        tokenizer: anything with ``decode(ids)`` (a ``tokenizers.Tokenizer`` or lit_sparse's).
        context: the ids before the first pushed one (the prompt): only its last ``hold_limit``
            are kept, to decode the first tokens as they read after it.
        hold_limit: tokens an incomplete character waits for before it is shown as is.
    """

    def __init__(self, tokenizer, context: Sequence[int] = (), hold_limit: int = 8):
        self.tokenizer, self.hold_limit = tokenizer, hold_limit
        self.context = [int(i) for i in context][-hold_limit:]
        self.ids = list(self.context)
        self._prefix, self._read = 0, len(self.ids)  # ids[_prefix:_read] shown, ids[_read:] wait

    def push(self, token_id: int) -> str:
        self.ids.append(int(token_id))
        before, after = self._decoded()
        waiting = after.endswith(REPLACEMENT) or len(after) < len(before)
        if waiting and len(self.ids) - self._read < self.hold_limit:
            return ""  # a character's first bytes: wait for the rest
        self._prefix, self._read = self._read, len(self.ids)
        return after[len(before) :]

    def flush(self) -> str:
        before, after = self._decoded()
        self._prefix, self._read = self._read, len(self.ids)
        return after[len(before) :]

    def text(self) -> str:
        """Every pushed token's text, as it reads after the context."""
        return self.tokenizer.decode(self.ids)[len(self.tokenizer.decode(self.context)) :]

    def _decoded(self) -> tuple[str, str]:
        decode = self.tokenizer.decode
        return decode(self.ids[self._prefix : self._read]), decode(self.ids[self._prefix :])
