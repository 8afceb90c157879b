"""neurosym.data.text: shipped corpora, word and BPE vocabularies, LM windows, tagged text."""

from __future__ import annotations

import gzip
from collections import Counter
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.data.text import (
    EOS_ID,
    PAD_ID,
    UNK_ID,
    BpeVocab,
    WordVocab,
    corpus_path,
    lm_windows,
    majority_upos,
    parse_tagged,
    read_lines,
    read_tagged,
    read_text,
)
from neurosym.errors import NeurosymError

SHARED = Path(__file__).resolve().parents[2] / "shared" / "data"
needs_shared = pytest.mark.skipif(not SHARED.is_dir(), reason="the shared data folder (../shared/data) is absent")


# ---------------------------------------------------------------------- shipped files
@needs_shared
@pytest.mark.parametrize("split", ["valid", "test"])
def test_shipped_wikitext_is_byte_identical_to_the_original(split):
    assert read_text(corpus_path("wikitext-2", split)) == (SHARED / "wikitext-2" / f"{split}.txt").read_text(encoding="utf-8")


@needs_shared
@pytest.mark.parametrize("split", ["train", "test"])
def test_shipped_ud_equals_the_conllu_words_and_tags(split):
    shipped = read_tagged(corpus_path("ud-english-ewt", split))
    original = read_tagged(SHARED / "ud-english-ewt" / f"en_ewt-ud-{split}.conllu")
    assert shipped == original
    if split == "train":  # stats.xml's <train> counts (README of the shared copy)
        assert len(shipped) == 12_544 and sum(len(s.forms) for s in shipped) == 204_577


@needs_shared
def test_data_dir_finds_the_original_files():
    assert corpus_path("ud-english-ewt", "test", SHARED).name == "en_ewt-ud-test.conllu"
    assert corpus_path("wikitext-2", "valid", SHARED) == SHARED / "wikitext-2" / "valid.txt"
    # the shared copy holds the standard train split (wiki.train.tokens as train.txt)
    assert corpus_path("wikitext-2", "train", SHARED) == SHARED / "wikitext-2" / "train.txt"


def test_data_dir_names_what_it_looked_for(tmp_path):
    (tmp_path / "wikitext-2").mkdir()
    (tmp_path / "wikitext-2" / "valid.txt").write_text(" = a = \n")
    assert corpus_path("wikitext-2", "valid", tmp_path) == tmp_path / "wikitext-2" / "valid.txt"
    with pytest.raises(NeurosymError, match="no wikitext-2 train file"):
        corpus_path("wikitext-2", "train", tmp_path)


def test_corpus_errors_are_clear(tmp_path):
    with pytest.raises(NeurosymError, match="unknown corpus 'ptb'"):
        corpus_path("ptb", "train")
    with pytest.raises(NeurosymError, match="has no split 'dev2'"):
        corpus_path("wikitext-2", "dev2")
    with pytest.raises(NeurosymError, match="not shipped"):
        corpus_path("wikitext-2", "train")
    with pytest.raises(NeurosymError, match="no such folder"):
        corpus_path("wikitext-2", "valid", tmp_path / "nope")
    with pytest.raises(NeurosymError, match="no such file"):
        read_text(tmp_path / "x.txt")
    (tmp_path / "bad.gz").write_bytes(b"not gzip")
    with pytest.raises(NeurosymError, match="cannot read text"):
        read_text(tmp_path / "bad.gz")


def test_gz_and_plain_files_read_alike(tmp_path):
    text = "a b <unk>\n\n c  d \n"
    (tmp_path / "t.txt").write_text(text)
    (tmp_path / "t.txt.gz").write_bytes(gzip.compress(text.encode()))
    assert read_lines(tmp_path / "t.txt") == read_lines(tmp_path / "t.txt.gz") == [["a", "b", "<unk>"], ["c", "d"]]


# ---------------------------------------------------------------------- vocabularies
def test_word_vocab_against_raw_counts_of_wikitext_valid():
    path = corpus_path("wikitext-2", "valid")
    raw = read_text(path)
    counts = Counter(raw.split())  # every whitespace-separated token of the file
    lines = read_lines(path)
    vocab = WordVocab.build(lines)
    assert vocab.tokens[:3] == ("<pad>", "<unk>", "<eos>")
    assert len(vocab) == len(counts) + 2  # <unk> is a word of the file; <pad>, <eos> are added
    assert vocab.counts[UNK_ID] == counts["<unk>"]
    words = vocab.tokens[3:]
    assert [vocab.counts[vocab.id(w)] for w in words] == [counts[w] for w in words]
    assert all((-counts[a], a) < (-counts[b], b) for a, b in zip(words, words[1:]))  # by count, ties alphabetical
    stream = vocab.encode_lines(lines)
    assert stream.numel() == sum(counts.values()) + len(lines)  # every token plus one <eos> per line
    assert int((stream == EOS_ID).sum()) == len(lines)
    assert int((stream == UNK_ID).sum()) == counts["<unk>"]
    assert int((stream == PAD_ID).sum()) == 0

    cut = WordVocab.build(lines, min_freq=3)
    assert len(cut) == 3 + sum(1 for w, c in counts.items() if c >= 3 and w != "<unk>")
    rare = sum(c for w, c in counts.items() if c < 3)
    assert int((cut.encode_lines(lines) == UNK_ID).sum()) == counts["<unk>"] + rare


def test_word_vocab_small_by_hand():
    v = WordVocab.build([["b", "a", "b"], ["<unk>", "c", "a", "b"]], min_freq=2)
    assert v.tokens == ("<pad>", "<unk>", "<eos>", "b", "a")
    assert v.encode(["a", "c", "zzz", "b"]) == [4, 1, 1, 3]
    assert v.encode_lines([["a"], ["c", "b"]]).tolist() == [4, 2, 1, 3, 2]
    assert WordVocab.build([["b", "a", "b", "c"]], max_size=4).tokens == ("<pad>", "<unk>", "<eos>", "b")
    with pytest.raises(NeurosymError, match="min_freq"):
        WordVocab.build([["a"]], min_freq=0)
    with pytest.raises(NeurosymError, match="max_size"):
        WordVocab.build([["a"]], max_size=2)


def test_bpe_vocab_keeps_specials_and_unk_whole():
    lines = read_lines(corpus_path("wikitext-2", "valid"))[:300]
    bpe = BpeVocab.train(lines, vocab_size=600)
    assert len(bpe) == 600 and bpe.tokens[:3] == ("<pad>", "<unk>", "<eos>")
    assert bpe.encode(["<unk>"]) == [UNK_ID]
    stream = bpe.encode_lines(lines[:20])
    assert int((stream == EOS_ID).sum()) == 20
    # sub-words spell the words back, with the space between them (byte-level: Ġ is the space's byte)
    ids = bpe.encode(["The", "game"])
    assert "".join(bpe.tokens[i] for i in ids) == "TheĠgame" and bpe.decode(ids) == "The game"
    with pytest.raises(NeurosymError, match="vocab_size"):
        BpeVocab.train(lines, vocab_size=258)  # fewer than the specials and the 256 bytes


# ---------------------------------------------------------------------- windows
def test_windows_by_hand():
    ids, targets = lm_windows(torch.arange(10), 3)
    assert ids.tolist() == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]
    assert targets.tolist() == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]
    ids, targets = lm_windows(torch.arange(9), 3)  # 9 tokens: only 2 full windows with their next token
    assert ids.shape == (2, 3) and targets[-1].tolist() == [4, 5, 6]
    assert lm_windows(torch.arange(1), 3)[0].shape == (0, 3)
    with pytest.raises(NeurosymError, match="window length"):
        lm_windows(torch.arange(5), 0)


@settings(max_examples=60, deadline=None)
@given(n=st.integers(0, 200), length=st.integers(1, 17))
def test_windows_tile_the_stream(n, length):
    stream = torch.randint(0, 50, (n,))
    ids, targets = lm_windows(stream, length)
    w = max(0, (n - 1) // length)
    assert ids.shape == targets.shape == (w, length)
    assert torch.equal(ids.reshape(-1), stream[: w * length])  # contiguous, stride = length, file order
    assert torch.equal(targets.reshape(-1), stream[1 : w * length + 1])


def test_windows_of_wikitext_cover_the_stream():
    lines = read_lines(corpus_path("wikitext-2", "valid"))
    stream = WordVocab.build(lines).encode_lines(lines)
    ids, _ = lm_windows(stream, 64)
    assert ids.shape[0] == (stream.numel() - 1) // 64


# ---------------------------------------------------------------------- tagged text
CONLLU = """# sent_id = 1
# text = Don't go #home
1-2\tDon't\t_\t_\t_\t_\t_\t_\t_\t_
1\tDo\tdo\tAUX\tVBP\t_\t3\taux\t_\t_
2\tn't\tnot\tPART\tRB\t_\t3\tadvmod\t_\t_
3\tgo\tgo\tVERB\tVB\t_\t0\troot\t_\t_
3.1\tgone\tgo\tVERB\tVB\t_\t_\t_\t_\t_
4\t#home\t#home\tX\tADD\t_\t3\tobj\t_\t_

1\tgo\tgo\tNOUN\tNN\t_\t0\troot\t_\t_
"""


def test_conllu_and_tsv_parse_alike():
    sents = parse_tagged(CONLLU)
    assert [s.forms for s in sents] == [("Do", "n't", "go", "#home"), ("go",)]
    assert sents[0].upos == ("AUX", "PART", "VERB", "X")
    tsv = "Do\tAUX\nn't\tPART\ngo\tVERB\n#home\tX\n\n#\tSYM\ngo\tNOUN\n"
    t = parse_tagged(tsv)
    assert t[0] == sents[0] and t[1].forms == ("#", "go")  # '#' is a word in FORM<TAB>UPOS files


def test_majority_upos_by_hand():
    sents = parse_tagged("go\tVERB\ngo\tNOUN\n\ngo\tVERB\nrun\tNOUN\nrun\tVERB\n")
    assert majority_upos(sents) == {"go": "VERB", "run": "NOUN"}  # run: a tie, alphabetical


def test_tagged_errors_name_the_line():
    with pytest.raises(NeurosymError, match=r"x.conllu:2:8: expected 10"):  # column 8: the third field, one too many
        parse_tagged("a\tNOUN\nb\tNOUN\tX\n", "x.conllu")
    with pytest.raises(NeurosymError, match=r":1:1: empty form"):
        parse_tagged("\tNOUN\n")
    with pytest.raises(NeurosymError, match=r":2:3: empty form or tag"):
        parse_tagged("a\tNOUN\nb\t\n")


def test_conllu_sentences_keep_syntactic_words_and_name_bad_lines():
    from neurosym.data.text import conllu_sentences

    word = lambda i, form: "\t".join([str(i), form, form.lower(), "X", "_", "_", "0", "root", "_", "_"])  # noqa: E731
    lines = ["# sent_id = 1", word(1, "Don't"), "1-2\tdon't" + "\t_" * 8, "1.1\tgap" + "\t_" * 8, word(2, "go"), "", "", word(1, "Hi")]
    got = [[(n, cols[1]) for n, cols in s] for s in conllu_sentences(lines, "x.conllu")]
    assert got == [[(2, "Don't"), (5, "go")], [(8, "Hi")]]
    with pytest.raises(NeurosymError, match=r"x\.conllu:2:6: a CoNLL-U word line has 10 tab-separated columns, this one has 2"):
        list(conllu_sentences(["", "1\tbad"], "x.conllu"))
    with pytest.raises(NeurosymError, match=r"x\.conllu:1:1: bad word ID 'a'"):
        list(conllu_sentences([word("a", "x")], "x.conllu"))
