"""Token vocabularies: text <-> integer ids.

The four special tokens come first so that their ids are fixed for every vocabulary and match
the defaults of ``TransformerConfig`` (``pad_id=0, bos_id=1, eos_id=2``):

====  =========  ==============================================================
id    token      role
====  =========  ==============================================================
0     ``<pad>``  fills short sequences up to the batch length; always masked out
1     ``<bos>``  "begin of sentence": the decoder's first input (lecture p24)
2     ``<eos>``  "end of sentence": the decoder outputs it to stop (p31-p34)
3     ``<unk>``  any token that is not in the vocabulary
====  =========  ==============================================================

``CharVocab`` splits text into characters (the number-reading and date tasks);
``WordVocab`` splits on white space (the toy translation task). Both share ``Vocab``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterable, Sequence
from typing import Any

from lecturekit._common import BOS_ID, EOS_ID, PAD_ID, SPECIAL_TOKENS, UNK_ID, check_type

__all__ = [
    "PAD_ID",
    "BOS_ID",
    "EOS_ID",
    "UNK_ID",
    "SPECIAL_TOKENS",
    "Vocab",
    "CharVocab",
    "WordVocab",
]


class Vocab(ABC):
    """A fixed, ordered list of tokens; ids are positions in that list.

    Subclasses decide how a string is split into tokens (``tokenize``) and joined back
    (``detokenize``). Regular tokens are kept in the order given (duplicates dropped), after
    the four special tokens. Every token must be one that ``tokenize`` can produce (one
    character for ``CharVocab``, no white space for ``WordVocab``): any other would be an id
    that no text ever encodes to.
    """

    kind = "base"

    def __init__(self, tokens: Iterable[str]) -> None:
        if isinstance(tokens, str) and type(self) is not CharVocab:
            raise TypeError(
                f"tokens must be an iterable of token strings, got a single str {tokens!r}"
            )
        itos: list[str] = list(SPECIAL_TOKENS)
        seen = set(itos)
        for token in tokens:
            if not isinstance(token, str) or token == "":
                raise TypeError(f"every token must be a non-empty str, got {token!r}")
            if self.tokenize(token) != [token]:
                raise ValueError(
                    f"every token must be a single {type(self).__name__} token (what tokenize "
                    f"makes of a text), got {token!r}, which tokenize splits into "
                    f"{self.tokenize(token)!r}; split it before building the vocabulary"
                )
            if token not in seen:
                seen.add(token)
                itos.append(token)
        self.itos: list[str] = itos
        self.stoi: dict[str, int] = {t: i for i, t in enumerate(itos)}

    # ids of the special tokens, as attributes so that code reads ``vocab.pad_id``
    pad_id = PAD_ID
    bos_id = BOS_ID
    eos_id = EOS_ID
    unk_id = UNK_ID

    @classmethod
    def from_texts(cls, texts: Iterable[str]) -> Vocab:
        """Build a vocabulary holding every token of ``texts``, in sorted order."""
        tokens: set[str] = set()
        for text in texts:
            tokens.update(cls.tokenize(_check_text(text, "texts[i]")))
        return cls(sorted(tokens))

    @staticmethod
    @abstractmethod
    def tokenize(text: str) -> list[str]:
        """Split a string into tokens."""

    @staticmethod
    @abstractmethod
    def detokenize(tokens: Sequence[str]) -> str:
        """Join tokens back into a string (inverse of ``tokenize``)."""

    def __len__(self) -> int:
        return len(self.itos)

    def __contains__(self, token: object) -> bool:
        return token in self.stoi

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.itos == self.itos

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(self.itos)))

    def __repr__(self) -> str:
        shown = " ".join(self.itos[4:24])
        more = " ..." if len(self.itos) > 24 else ""
        return f"{type(self).__name__}(size={len(self)}, tokens=[{shown}{more}])"

    def token_to_id(self, token: str) -> int:
        """Id of ``token``; ``unk_id`` if it is not in the vocabulary."""
        return self.stoi.get(token, UNK_ID)

    def id_to_token(self, index: int) -> str:
        """Token string of id ``index``; raises ``ValueError`` outside ``[0, len(self))``."""
        return self.itos[self._check_id(index)]

    def encode(
        self, text: str, add_bos: bool = False, add_eos: bool = False, strict: bool = False
    ) -> list[int]:
        """Text -> list of ids.

        Unknown tokens become ``unk_id``; with ``strict=True`` they raise ``ValueError``
        instead (useful to catch a vocabulary built from the wrong data).
        """
        tokens = self.tokenize(_check_text(text, "text"))
        ids = []
        for token in tokens:
            index = self.stoi.get(token)
            if index is None:
                if strict:
                    raise ValueError(
                        f"text contains {token!r}, which is not in the vocabulary "
                        f"({len(self)} tokens); pass strict=False to map it to <unk>"
                    )
                index = UNK_ID
            ids.append(index)
        if add_bos:
            ids.insert(0, BOS_ID)
        if add_eos:
            ids.append(EOS_ID)
        return ids

    def decode(
        self, ids: Iterable[Any], stop_at_eos: bool = True, keep_special: bool = False
    ) -> str:
        """Ids (list, tuple or 1-D tensor) -> text.

        By default decoding stops at the first ``<eos>`` and drops ``<pad>``/``<bos>``, which
        is what one wants for a model's output. ``<unk>`` is always kept so errors stay visible.
        """
        tokens = []
        for index in _as_id_list(ids):
            index = self._check_id(index)
            if index == EOS_ID and stop_at_eos:
                break
            if index in (PAD_ID, BOS_ID, EOS_ID) and not keep_special:
                continue
            tokens.append(self.itos[index])
        return self.detokenize(tokens)

    def to_dict(self) -> dict[str, Any]:
        """Plain-Python form (str and list only) for checkpoints loaded with ``weights_only``."""
        return {"kind": self.kind, "tokens": self.itos[len(SPECIAL_TOKENS) :]}

    @staticmethod
    def from_dict(state: dict[str, Any]) -> Vocab:
        """Inverse of ``to_dict``."""
        if not isinstance(state, dict) or "kind" not in state or "tokens" not in state:
            raise ValueError(f"state must be a dict with 'kind' and 'tokens', got {state!r:.80}")
        kinds = {"char": CharVocab, "word": WordVocab}
        if state["kind"] not in kinds:
            raise ValueError(f"state['kind'] must be one of {sorted(kinds)}, got {state['kind']!r}")
        check_type("state['tokens']", state["tokens"], (list, tuple), "a list of token strings")
        return kinds[state["kind"]](list(state["tokens"]))

    def _check_id(self, index: Any) -> int:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"token ids must be int, got {type(index).__name__} {index!r}")
        if not 0 <= index < len(self.itos):
            raise ValueError(f"token id {index} is outside the vocabulary range [0, {len(self)})")
        return index


class CharVocab(Vocab):
    """One token per character: ``"两万"`` -> ``["两", "万"]``."""

    kind = "char"

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return list(text)

    @staticmethod
    def detokenize(tokens: Sequence[str]) -> str:
        return "".join(tokens)


class WordVocab(Vocab):
    """One token per white-space separated word: ``"the big dog"`` -> ``["the", "big", "dog"]``."""

    kind = "word"

    @staticmethod
    def tokenize(text: str) -> list[str]:
        return text.split()

    @staticmethod
    def detokenize(tokens: Sequence[str]) -> str:
        return " ".join(tokens)


def _check_text(text: Any, name: str) -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {type(text).__name__}")
    return text


def _as_id_list(ids: Iterable[Any]) -> list[int]:
    """Accept a list/tuple of ints or a 1-D integer tensor/array; return a list of ints."""
    if hasattr(ids, "tolist") and hasattr(ids, "ndim"):
        if ids.ndim != 1:
            raise ValueError(f"ids must be 1-D, got shape {tuple(ids.shape)}")
        if str(ids.dtype).split(".")[-1].startswith(("float", "complex", "bool")):
            raise TypeError(f"ids must hold integers, got dtype {ids.dtype}")
        return ids.tolist()
    if isinstance(ids, str):
        raise TypeError("ids must be a sequence of ints, got a str (did you mean encode()?)")
    return list(ids)
