"""A tiny, deterministic, download-free tokenizer for the CPU policy.

Character level over printable ASCII, plus a few special tokens that are matched as whole words
first (``<pad>``, ``<bos>``, ``<eos>``, ``</think>``). Making ``</think>`` one token keeps the
thinking/answer boundary crisp for a 2-layer model; any interruption phrase still encodes (its
other characters are ordinary character tokens). The vocabulary is a constant, so it needs no file
and enters the policy cache key only through :data:`TOKENIZER_VERSION`.
"""

from __future__ import annotations

import string
from collections.abc import Sequence

from scalerl.harness.errors import ConfigError

TOKENIZER_VERSION = "char-v1"

SPECIALS: tuple[str, ...] = ("<pad>", "<bos>", "<eos>", "</think>")
# Printable ASCII without the vertical-whitespace characters (which tasks never emit).
CHARS: tuple[str, ...] = tuple(c for c in string.printable if c not in "\t\n\r\x0b\x0c")


class CharTokenizer:
    """Encodes text to ids and back. Special tokens win over characters at the same position."""

    def __init__(self) -> None:
        self.vocab: tuple[str, ...] = SPECIALS + CHARS
        self._ids = {tok: i for i, tok in enumerate(self.vocab)}
        self.pad_id = self._ids["<pad>"]
        self.bos_id = self._ids["<bos>"]
        self.eos_id = self._ids["<eos>"]
        self.think_end_id = self._ids["</think>"]
        self.stop_ids: tuple[int, ...] = (self.eos_id,)

    @property
    def vocab_size(self) -> int:
        return len(self.vocab)

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        i = 0
        while i < len(text):
            for sp in SPECIALS:
                if text.startswith(sp, i):
                    out.append(self._ids[sp])
                    i += len(sp)
                    break
            else:
                ch = text[i]
                if ch not in self._ids:
                    raise ConfigError(
                        "character outside the tiny tokenizer's vocabulary (printable ASCII)",
                        field="text",
                        value=ch,
                        fix="use printable ASCII in task prompts and the interruption phrase",
                    )
                out.append(self._ids[ch])
                i += 1
        return out

    def decode(self, ids: Sequence[int]) -> str:
        return "".join(self.vocab[i] for i in ids if i != self.pad_id)

    def prompt_ids(self, prompt: str, system: str | None = None) -> list[int]:
        """BOS, then the system prompt (if any) and the prompt, a space apart (no chat template)."""
        return [self.bos_id, *self.encode(f"{system} {prompt}" if system else prompt)]
