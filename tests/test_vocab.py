"""Vocabularies: character, word, and `tokenizers` (byte-level BPE) with exact surfaces."""

import json

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from neurosym.errors import NeurosymError, SourceError
from neurosym.vocab import Vocab, byte_level_alphabet, load_vocab

TEXT = ["the cat sat on the mat", "a dog sat on a log", "café crème brûlée"]


@pytest.fixture(scope="module")
def bpe():
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), special_tokens=["<|endoftext|>"], show_progress=False
    )
    tok.train_from_iterator(TEXT * 20, trainer)
    return tok


def test_byte_level_alphabet_is_a_bijection_onto_bytes():
    alpha = byte_level_alphabet()
    assert sorted(alpha.values()) == list(range(256))
    assert alpha["!"] == ord("!") and alpha["Ġ"] == ord(" ")  # GPT-2's space stand-in


def test_char_vocab_roundtrip_and_unk():
    v = Vocab.chars_from_corpus("".join(TEXT))
    ids = v.encode("the mat")
    assert v.decode(ids) == "the mat"
    assert v.spell(ids) == "the mat"
    assert v.encode("Z") == [v.unk]
    assert v.surfaces[v.unk] is None and v.kind == "char"


def test_word_vocab_from_corpus_counts_and_caps():
    v = Vocab.words_from_corpus(TEXT, min_count=2)
    assert {"the", "sat", "on", "a"} <= set(v.tokens) and "cat" not in v
    assert v.encode("the cat") == [v.id("the"), v.unk]
    small = Vocab.words_from_corpus(TEXT, max_size=6)
    assert len(small) == 6


def test_tokenizer_vocab_has_exact_bytes(bpe, tmp_path):
    v = Vocab.from_tokenizer(bpe)
    assert v.kind == "bytes" and len(v) == bpe.get_vocab_size()
    assert v.surfaces[bpe.token_to_id("<|endoftext|>")] is None
    for s in TEXT + ["brûlée!", "naïve é"]:
        ids = bpe.encode(s).ids
        assert v.spell(ids) == s.encode("utf-8")
        assert v.decode(ids) == s
    # a lone continuation byte is its own token: surfaces may split a UTF-8 character
    assert any(isinstance(s, bytes) and len(s) == 1 and s[0] >= 0x80 for s in v.surfaces)
    path = tmp_path / "tok.json"
    bpe.save(str(path))
    assert Vocab.from_tokenizer(path) == v
    assert load_vocab(path) == v


def test_json_roundtrip_and_hash(bpe):
    for v in (Vocab.chars("abc"), Vocab.words(["x", "yy"]), Vocab.from_tokenizer(bpe)):
        back = Vocab.from_json(json.loads(json.dumps(v.to_json())))
        assert back == v and back.sha256() == v.sha256()
    assert Vocab.chars("ab").sha256() != Vocab.chars("ba").sha256()


def test_bad_vocabularies_are_clear_errors(tmp_path):
    with pytest.raises(NeurosymError, match="appears twice"):
        Vocab(["a", "a"], ["a", "a"], "word")
    with pytest.raises(NeurosymError, match="not a single character"):
        Vocab.chars(["ab"])
    with pytest.raises(NeurosymError, match="no such vocabulary"):
        load_vocab(tmp_path / "missing.txt")
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SourceError):
        Vocab.from_tokenizer(bad)
    with pytest.raises(NeurosymError, match="special"):
        Vocab.chars("ab").spell([0])


def test_bytes_spec_is_all_256_bytes():
    v = load_vocab("bytes")
    assert len(v) == 256 and v.spell([0xC3, 0xA9]) == "é".encode()
