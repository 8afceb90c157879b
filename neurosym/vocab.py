"""Vocabularies: token strings <-> ids, and what each token spells.

A :class:`Vocab` knows, for every token id, its *surface*: the exact text the token
stands for. Automata walk surfaces through a character DFA to become token-level
automata, so the surface must be exact:

* ``kind="char"``: each token is one character (``str`` of length 1);
* ``kind="word"``: each token is a whole string (a word, or any piece of text);
* ``kind="bytes"``: each token is a byte string (byte-level BPE: a token may end in
  the middle of a UTF-8 character).

Special tokens (``<pad>``, ``<unk>``, ``<bos>``, ``<eos>`` or a tokenizer's special
tokens) spell nothing; their surface is ``None``.
"""

from __future__ import annotations

import hashlib
import json
import re
import weakref
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Literal

from neurosym.errors import NeurosymError, SourceError
from neurosym.files import read_input

Kind = Literal["char", "word", "bytes"]
Surface = str | bytes | None

DEFAULT_SPECIALS = ("<pad>", "<unk>", "<bos>", "<eos>")


@lru_cache(maxsize=1)
def byte_level_alphabet() -> dict[str, int]:
    """The GPT-2 byte-level map from printable stand-in characters to byte values.

    Byte-level BPE (GPT-2, RoBERTa, ``tokenizers.ByteLevelBPETokenizer``) writes each
    byte as one printable character: bytes that are printable Latin-1 stand for
    themselves, the others are shifted to code points 256 and up, in byte order.
    """
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    kept = set(printable)
    char_of = {b: chr(b) for b in printable}
    shift = 0
    for b in range(256):
        if b not in kept:
            char_of[b] = chr(256 + shift)
            shift += 1
    return {c: b for b, c in char_of.items()}


class Vocab:
    """Token strings <-> ids, with each token's exact surface.

    Args:
        tokens: display strings, one per id.
        surfaces: what each token spells (``None`` for special tokens).
        kind: ``"char"``, ``"word"`` or ``"bytes"``.
        unk: the id unknown input maps to, or ``None``.
    """

    def __init__(
        self,
        tokens: Sequence[str],
        surfaces: Sequence[Surface],
        kind: Kind,
        unk: int | None = None,
        tokenizer=None,
    ):
        if len(tokens) != len(surfaces):
            raise NeurosymError(f"vocabulary has {len(tokens)} tokens but {len(surfaces)} surfaces")
        if kind not in ("char", "word", "bytes"):
            raise NeurosymError(f"unknown vocabulary kind {kind!r}; expected 'char', 'word' or 'bytes'")
        self.tokens: list[str] = list(tokens)
        self.surfaces: list[Surface] = list(surfaces)
        self.kind: Kind = kind
        self.unk = unk
        self._tokenizer = tokenizer
        self._sha256: str | None = None  # the content hash, computed once (a vocabulary is not changed after it is built)
        self._index: dict[str, int] = {}
        for i, t in enumerate(self.tokens):
            if t in self._index:
                raise NeurosymError(f"token {t!r} appears twice in the vocabulary (ids {self._index[t]} and {i})")
            self._index[t] = i
        self._by_surface: dict[Surface, int] = {}
        for i, s in enumerate(self.surfaces):
            if s is not None:
                self._by_surface.setdefault(s, i)

    # ------------------------------------------------------------------ builders
    @classmethod
    def chars(cls, alphabet: Iterable[str], specials: Sequence[str] = DEFAULT_SPECIALS) -> "Vocab":
        """A character vocabulary: specials first, then each distinct character in order."""
        seen = dict.fromkeys(c for c in alphabet)
        for c in seen:
            if len(c) != 1:
                raise NeurosymError(f"character vocabulary entry {c!r} is not a single character")
        specials = list(specials)
        chars = [c for c in seen if c not in specials]
        unk = specials.index("<unk>") if "<unk>" in specials else None
        return cls([*specials, *chars], [None] * len(specials) + chars, "char", unk=unk)

    @classmethod
    def chars_from_corpus(cls, text: str, specials: Sequence[str] = DEFAULT_SPECIALS) -> "Vocab":
        """Every character of ``text``, most frequent first (ties by first appearance)."""
        counts = Counter(text)
        return cls.chars(sorted(counts, key=lambda c: -counts[c]), specials)

    @classmethod
    def words(cls, words: Iterable[str], specials: Sequence[str] = DEFAULT_SPECIALS) -> "Vocab":
        """A word vocabulary from a list: specials first, then each distinct word in order."""
        specials = list(specials)
        ws = [w for w in dict.fromkeys(words) if w not in specials]
        for w in ws:
            if w == "":
                raise NeurosymError("word vocabulary contains the empty string")
        unk = specials.index("<unk>") if "<unk>" in specials else None
        return cls([*specials, *ws], [None] * len(specials) + ws, "word", unk=unk)

    @classmethod
    def words_from_corpus(
        cls,
        lines: Iterable[str],
        min_count: int = 1,
        max_size: int | None = None,
        specials: Sequence[str] = DEFAULT_SPECIALS,
    ) -> "Vocab":
        """Whitespace-split words of ``lines`` seen at least ``min_count`` times, most frequent first."""
        counts = Counter(w for line in lines for w in line.split())
        ranked = sorted((w for w, n in counts.items() if n >= min_count), key=lambda w: (-counts[w], w))
        if max_size is not None:
            ranked = ranked[: max(0, max_size - len(specials))]
        return cls.words(ranked, specials)

    @classmethod
    def from_tokenizer(cls, tokenizer, size: int | None = None) -> "Vocab":
        """A vocabulary from a tokenizer: the one front door, built once and reusable
        (what XGrammar calls ``TokenizerInfo``; every guide and processor over the same
        tokenizer reads it, :func:`neurosym.compile_guide`).

        ``tokenizer`` is one of:

        * a path: a ``tokenizers`` JSON file, or a folder holding ``tokenizer.json`` (a
          saved Hugging Face tokenizer);
        * a ``tokenizers.Tokenizer``: byte-level ones (a ``ByteLevel`` pre-tokenizer or
          decoder) give a ``"bytes"`` vocabulary whose surfaces are each token's exact
          bytes; other tokenizers a ``"word"`` vocabulary whose surfaces are the token
          strings, with the SentencePiece word marker ``▁`` read as a space;
        * a fast ``transformers`` tokenizer (anything with a ``backend_tokenizer``): a
          ``"bytes"`` vocabulary, byte-level BPE (GPT-2, Llama 3, Qwen) or
          SentencePiece-style (``Metaspace``, or a ``▁`` -> space ``Replace`` decoder,
          byte-fallback tokens ``<0xHH>`` read as their byte); the tokenizer's special
          tokens spell nothing.

        ``size`` (a model's ``config.vocab_size``) pads the vocabulary with unused ids
        that spell nothing, or drops the ids a model cannot produce. The result is
        kept per tokenizer object (weakly): asking again for the same tokenizer, size and
        token count returns the same :class:`Vocab`, its tries and fingerprints already
        built.
        """
        if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 1):
            raise NeurosymError(f"vocab_size must be a positive number of token ids, got {size!r}")
        if isinstance(tokenizer, (str, Path)):
            return _sized(_tokenizer_file_vocab(Path(tokenizer)), size)
        key = _tokenizer_key(tokenizer, size)
        hit = _BY_TOKENIZER.get(key) if key is not None else None
        if hit is not None and hit[0]() is tokenizer:
            return hit[1]
        if getattr(tokenizer, "backend_tokenizer", None) is not None:  # a fast transformers tokenizer
            vocab = _transformers_vocab(tokenizer, size)
        elif hasattr(tokenizer, "to_str") and hasattr(tokenizer, "get_vocab"):
            vocab = _sized(_tokenizers_vocab(tokenizer), size)
        else:
            raise NeurosymError(f"Vocab.from_tokenizer takes a tokenizers JSON file, a tokenizers.Tokenizer or a fast transformers "
                                f"tokenizer (use_fast=True), got {type(tokenizer).__name__}")
        if key is not None:
            try:
                ref = weakref.ref(tokenizer, lambda _, k=key, kept=_BY_TOKENIZER: kept.pop(k, None))
            except TypeError:  # an object that takes no weak reference: not kept
                return vocab
            _BY_TOKENIZER[key] = (ref, vocab)
        return vocab

    def padded(self, size: int) -> "Vocab":
        """This vocabulary with ids ``len(self) .. size - 1`` added as unused tokens
        ``<unused:i>`` that spell nothing (a model may have more output rows than its
        tokenizer has tokens); itself when ``size == len(self)``."""
        if size < len(self):
            raise NeurosymError(f"cannot pad a vocabulary of {len(self)} tokens to {size}")
        if size == len(self):
            return self
        extra = range(len(self), size)
        return Vocab(self.tokens + [f"<unused:{i}>" for i in extra], self.surfaces + [None] * len(extra), self.kind,
                     unk=self.unk, tokenizer=self._tokenizer)

    @property
    def tokenizer(self):
        """The ``tokenizers.Tokenizer`` that encodes text for this vocabulary, or None
        (a vocabulary of words or characters built without one)."""
        return self._tokenizer

    # ------------------------------------------------------------------ lookups
    def __len__(self) -> int:
        return len(self.tokens)

    def __contains__(self, token: str) -> bool:
        return token in self._index

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Vocab) and self.kind == other.kind and self.surfaces == other.surfaces and self.tokens == other.tokens

    def __hash__(self) -> int:
        return hash(self.sha256())

    def __repr__(self) -> str:
        return f"Vocab(kind={self.kind!r}, size={len(self)})"

    def id(self, token: str) -> int:
        """The id of a token string (its display form)."""
        try:
            return self._index[token]
        except KeyError:
            if self.unk is not None:
                return self.unk
            raise NeurosymError(f"token {token!r} is not in the vocabulary and it has no <unk>") from None

    def encode(self, text: str) -> list[int]:
        """Token ids for ``text``: per character (char), per whitespace-split word (word
        vocabularies built from words), or by the tokenizer (tokenizer vocabularies)."""
        if self._tokenizer is not None:
            return list(self._tokenizer.encode(text, add_special_tokens=False).ids)
        if self.kind == "char":
            return [self._surface_id(c) for c in text]
        if self.kind == "word":
            return [self._surface_id(w) for w in text.split()]
        raise NeurosymError("a byte vocabulary without a tokenizer cannot encode text; pass token ids")

    def _surface_id(self, s: str) -> int:
        i = self._by_surface.get(s)
        if i is None:
            if self.unk is None:
                raise NeurosymError(f"{s!r} is not in the vocabulary and it has no <unk>")
            return self.unk
        return i

    def spell(self, ids: Iterable[int]) -> str | bytes:
        """The exact concatenated surfaces of ``ids`` (bytes for a byte vocabulary).

        Raises if an id is a special token, which spells nothing."""
        parts = []
        for i in ids:
            s = self.surfaces[int(i)]
            if s is None:
                raise NeurosymError(f"token {self.tokens[int(i)]!r} (id {int(i)}) is special and spells no text")
            parts.append(s)
        return b"".join(parts) if self.kind == "bytes" else "".join(parts)

    def decode(self, ids: Iterable[int], skip_special: bool = True) -> str:
        """Readable text for ``ids`` (invalid UTF-8 shown as U+FFFD)."""
        out: list[str | bytes] = []
        for i in ids:
            s = self.surfaces[int(i)]
            if s is None:
                if not skip_special:
                    out.append(self.tokens[int(i)].encode() if self.kind == "bytes" else self.tokens[int(i)])
            else:
                out.append(s)
        if self.kind == "bytes":
            return b"".join(out).decode("utf-8", errors="replace")  # type: ignore[arg-type]
        sep = " " if self.kind == "word" and self._tokenizer is None else ""
        return sep.join(out)  # type: ignore[arg-type]

    # ------------------------------------------------------------------ persistence
    def to_json(self) -> dict:
        """A JSON-safe description (byte surfaces as hex)."""
        return {
            "kind": self.kind,
            "tokens": self.tokens,
            "surfaces": [s.hex() if isinstance(s, bytes) else s for s in self.surfaces],
            "unk": self.unk,
            "tokenizer": self._tokenizer.to_str() if self._tokenizer is not None else None,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Vocab":
        kind = data["kind"]
        surfaces = [bytes.fromhex(s) if (kind == "bytes" and s is not None) else s for s in data["surfaces"]]
        tokenizer = None
        if data.get("tokenizer"):
            from tokenizers import Tokenizer

            tokenizer = Tokenizer.from_str(data["tokenizer"])
        return cls(data["tokens"], surfaces, kind, unk=data.get("unk"), tokenizer=tokenizer)

    def sha256(self) -> str:
        """A content hash of the kind, tokens and surfaces (used in artifact and guide cache
        keys), computed once."""
        if self._sha256 is not None:
            return self._sha256
        h = hashlib.sha256(self.kind.encode())
        for t, s in zip(self.tokens, self.surfaces):
            h.update(b"\x00" + t.encode("utf-8", "surrogatepass") + b"\x01")
            h.update(b"-" if s is None else (s if isinstance(s, bytes) else s.encode("utf-8", "surrogatepass")))
        self._sha256 = h.hexdigest()
        return self._sha256


# ---------------------------------------------------------------------- tokenizers
BYTE_FALLBACK = re.compile(r"<0x([0-9A-Fa-f]{2})>")
_BY_TOKENIZER: dict[tuple, tuple[weakref.ref, "Vocab"]] = {}  # (id, size, tokens) -> (the tokenizer, its vocabulary)


def _tokenizer_key(tokenizer, size: int | None) -> tuple | None:
    """What a tokenizer's cached vocabulary is kept under: the object, the size asked for
    and its token count (a tokenizer that grew tokens since is read again)."""
    try:
        return (id(tokenizer), size, len(tokenizer))
    except TypeError:
        try:
            return (id(tokenizer), size, tokenizer.get_vocab_size(with_added_tokens=True))
        except Exception:  # noqa: BLE001 -- not a tokenizer at all: the caller says so
            return None


def _sized(vocab: "Vocab", size: int | None) -> "Vocab":
    """``vocab`` padded with unused ids to ``size``, or cut to it."""
    if size is None or size == len(vocab):
        return vocab
    if size > len(vocab):
        return vocab.padded(size)
    return Vocab(vocab.tokens[:size], vocab.surfaces[:size], vocab.kind, unk=vocab.unk if vocab.unk is not None and vocab.unk < size else None,
                 tokenizer=vocab.tokenizer)


def _tokenizer_file_vocab(path: Path) -> "Vocab":
    """A ``tokenizers`` JSON file, or a folder holding ``tokenizer.json``."""
    from tokenizers import Tokenizer  # lazy: only for tokenizer vocabularies

    if path.is_dir():
        inside = path / "tokenizer.json"
        if not inside.is_file():
            raise NeurosymError(f"{path}: a folder without tokenizer.json (a saved fast tokenizer has one)")
        path = inside
    try:
        data = read_input(path)  # a regular file only, read once here: tokenizers then parses the text
    except FileNotFoundError:
        raise NeurosymError(f"{path}: no such tokenizer file") from None
    except OSError as err:
        raise NeurosymError(f"{path}: cannot read ({err.strerror or err})") from None
    try:
        tokenizer = Tokenizer.from_str(data.decode("utf-8"))
    except UnicodeDecodeError as bad:
        raise SourceError.not_utf8(bad, path) from None
    except Exception as err:  # tokenizers raises a bare Exception on bad JSON
        raise _tokenizer_file_error(path, err) from None
    return _tokenizers_vocab(tokenizer)


def _tokenizers_vocab(tokenizer) -> "Vocab":
    """A ``tokenizers.Tokenizer``'s vocabulary (:meth:`Vocab.from_tokenizer`)."""
    spec = json.loads(tokenizer.to_str())
    byte_level = _mentions(spec.get("pre_tokenizer"), "ByteLevel") or _mentions(spec.get("decoder"), "ByteLevel")
    vocab = tokenizer.get_vocab(with_added_tokens=True)
    size = max(vocab.values()) + 1
    tokens: list[str | None] = [None] * size
    for tok, i in vocab.items():
        tokens[i] = tok
    special = {t["content"] for t in spec.get("added_tokens", []) if t.get("special")}
    alphabet = byte_level_alphabet()
    surfaces: list[Surface] = []
    for i, tok in enumerate(tokens):
        if tok is None:
            tokens[i] = f"<unused:{i}>"
            surfaces.append(None)
        elif tok in special:
            surfaces.append(None)
        elif byte_level:
            try:
                surfaces.append(bytes(alphabet[c] for c in tok))
            except KeyError:  # an added, non-special token written as plain text
                surfaces.append(tok.encode("utf-8"))
        else:
            surfaces.append(tok.replace("▁", " "))
    model = spec.get("model") or {}
    unk_token = model.get("unk_token")
    unk = vocab.get(unk_token) if unk_token else None
    return Vocab(tokens, surfaces, "bytes" if byte_level else "word", unk=unk, tokenizer=tokenizer)


def _transformers_vocab(tokenizer, size: int | None) -> "Vocab":
    """A ``"bytes"`` vocabulary of a fast ``transformers`` tokenizer (:meth:`Vocab.from_tokenizer`)."""
    backend = tokenizer.backend_tokenizer
    spec = json.loads(backend.to_str())
    special = set(getattr(tokenizer, "all_special_ids", ()) or ()) | {
        i for i, t in (getattr(tokenizer, "added_tokens_decoder", None) or {}).items() if getattr(t, "special", False)}
    if _mentions(spec.get("pre_tokenizer"), "ByteLevel") or _mentions(spec.get("decoder"), "ByteLevel"):
        base = _tokenizers_vocab(backend)
        tokens, surfaces = base.tokens, base.surfaces
    elif _mentions(spec.get("decoder"), "Metaspace") or _replaces_word_marker(spec.get("decoder")):
        tokens, surfaces = _metaspace_surfaces(backend, bool((spec.get("model") or {}).get("byte_fallback")))
    else:
        kind = (spec.get("decoder") or {}).get("type", "no decoder")
        raise NeurosymError(
            f"a transformers tokenizer is read as byte-level BPE (GPT-2 style) or SentencePiece-style (Metaspace); this one's decoder is {kind}"
        )
    surfaces = [None if i in special else s for i, s in enumerate(surfaces)]
    if size is not None:
        tokens = tokens[:size] + [f"<unused:{i}>" for i in range(len(tokens), size)]
        surfaces = surfaces[:size] + [None] * (size - len(surfaces))
    unk_id = getattr(tokenizer, "unk_token_id", None)
    unk = unk_id if unk_id is not None and unk_id < len(tokens) else None
    return Vocab(tokens, surfaces, "bytes", unk=unk, tokenizer=backend)


def _mentions(component, kind: str) -> bool:
    """Whether a tokenizer JSON component, or one inside a Sequence of them, is of ``kind``."""
    if not isinstance(component, dict):
        return False
    if component.get("type") == kind:
        return True
    return any(_mentions(c, kind) for c in component.get("pretokenizers") or component.get("decoders") or [])


def _replaces_word_marker(decoder) -> bool:
    """A decoder that turns SentencePiece's ``▁`` into a space (Llama 2, Mistral)."""
    if not isinstance(decoder, dict):
        return False
    if decoder.get("type") == "Replace":
        return (decoder.get("pattern") or {}).get("String") == "▁"
    return any(_replaces_word_marker(d) for d in decoder.get("decoders") or [])


def _metaspace_surfaces(backend, byte_fallback: bool) -> tuple[list[str], list[bytes | None]]:
    """Token strings and bytes of a SentencePiece-style tokenizer (``▁`` is a space)."""
    vocab = backend.get_vocab(with_added_tokens=True)
    tokens: list[str] = [f"<unused:{i}>" for i in range(max(vocab.values()) + 1)]
    surfaces: list[bytes | None] = [None] * len(tokens)
    for tok, i in vocab.items():
        tokens[i] = tok
        byte = BYTE_FALLBACK.fullmatch(tok) if byte_fallback else None
        surfaces[i] = bytes([int(byte.group(1), 16)]) if byte else tok.replace("▁", " ").encode("utf-8")
    return tokens, surfaces


def _tokenizer_file_error(path: Path, err: Exception) -> NeurosymError:
    """Why ``tokenizers`` could not read ``path``, at the place it names: the first byte
    that is not UTF-8, or the line and column of serde's message."""
    try:
        path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as bad:
        return SourceError.not_utf8(bad, path)
    except IsADirectoryError:
        return NeurosymError(f"{path}: is a folder, not a tokenizers JSON file")
    except OSError as unreadable:
        return NeurosymError(f"{path}: cannot read ({unreadable.strerror or unreadable})")
    place = re.search(r"line (\d+) column (\d+)", str(err))
    line, col = (int(place.group(1)), max(1, int(place.group(2)))) if place else (1, 1)
    return SourceError(f"not a tokenizers JSON file ({err})", path, line, col)


def load_vocab(spec: str | Path) -> Vocab:
    """A vocabulary from a CLI-style spec.

    ``chars`` / ``bytes`` (all 256 bytes), a tokenizers ``*.json`` file, or a text file
    with one token per line (a word vocabulary).
    """
    spec_s = str(spec)
    if spec_s == "bytes":
        vals = [bytes([b]) for b in range(256)]
        return Vocab([v.hex() for v in vals], vals, "bytes")
    path = Path(spec_s)
    if not path.exists():
        raise NeurosymError(f"{spec_s}: no such vocabulary file (expected 'bytes', a tokenizers .json, or a word list)")
    if path.suffix == ".json":
        return Vocab.from_tokenizer(path)
    try:
        text = read_input(path).decode("utf-8")
    except IsADirectoryError:
        raise NeurosymError(f"{path}: is a folder, not a vocabulary file") from None
    except OSError as err:
        raise NeurosymError(f"{path}: cannot read the vocabulary ({err.strerror or err})") from None
    except UnicodeDecodeError as err:
        raise SourceError.not_utf8(err, path) from None
    words = [w for w in text.splitlines() if w.strip()]
    if not words:
        raise NeurosymError(f"{path}: the vocabulary file holds no token (one per line)")
    return Vocab.words(words)
