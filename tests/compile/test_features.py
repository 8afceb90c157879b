"""FeatureBank: the recipe lexicon's 23 features, exact memberships, causality, modifiers."""

from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from neurosym.compile.lexicon import FeatureBank, compile_lexicon, default_vocab, load_lexicon, shift
from neurosym.dsl.lexicon import parse_lexicon
from neurosym.errors import NeurosymError
from neurosym.vocab import Vocab
from neurosym.compile.lexicon import term_words

ROOT = Path(__file__).resolve().parents[2]
SENTIMENT = ROOT / "lexicons" / "sentiment.lex"
NAMES = [
    "is_noun", "is_verb", "is_adj", "is_subject", "is_object", "is_head", "is_bos", "is_eos", "is_comma",
    "is_question", "is_exclaim", "pos_low", "pos_med", "pos_high", "neg_low", "neg_med", "neg_high", "str_low", "str_med",
    "str_high", "coref_subject", "is_capitalized", "is_pronoun",
]  # fmt: skip


def pw(x: float, c: float) -> float:
    return 0.9 ** (abs(x - c) / 0.35)


@pytest.fixture(scope="module")
def bank() -> FeatureBank:
    return load_lexicon(SENTIMENT)


def encode(bank: FeatureBank, text: str) -> torch.Tensor:
    return torch.tensor([bank.vocab.encode(text)])


def roles_for(ids: torch.Tensor, **positions: list[int]) -> dict[str, torch.Tensor]:
    out = {}
    for name in ("subject", "object", "head"):
        r = torch.zeros(ids.shape, dtype=torch.bool)
        r[0, positions.get(name, [])] = True
        out[name] = r
    return out


def row(bank, x, t) -> dict[str, float]:
    return dict(zip(bank.names, x[0, t].tolist()))


# ---------------------------------------------------------------------- the recipe lexicon
def test_sentiment_lexicon_has_the_23_features_in_order(bank):
    assert bank.names == NAMES and len(bank) == 23
    assert bank.roles == ["head", "object", "subject"]
    lex = bank.lexicon
    assert lex.class_words("INTENS") == ["slightly", "moderately", "very", "extremely"]
    assert [lex.value(w, "strength") for w in lex.class_words("INTENS")] == [0.2, 0.5, 0.8, 1.0]
    assert lex.class_words("SUBJ") == ["Alice", "Bob", "Carol", "Dave", "Eve"]
    assert lex.class_words("VERB") == ["finishes", "reviews", "trains", "starts", "cooks"]
    assert lex.class_words("OBJ") == ["task", "paper", "model", "project", "meal"]
    assert all(lex.value(w, "polarity") > 0 for w in lex.class_words("ADJ_POS"))
    assert all(lex.value(w, "polarity") < 0 for w in lex.class_words("ADJ_NEG"))
    for w in ["He", "She", "They", "he", "she", "they", "the", ".", "!", ",", "?"]:
        assert w in bank.vocab


def test_hand_written_sentence(bank):
    ids = encode(bank, "Alice finishes the very good task .")
    x = bank.featurize(ids, roles_for(ids, subject=[0], object=[2, 3, 4, 5], head=[5]))
    assert x.shape == (1, 7, 23)
    alice, finishes, the, very, good, task, dot = (row(bank, x, t) for t in range(7))
    assert alice["is_noun"] == alice["is_subject"] == alice["is_bos"] == alice["is_capitalized"] == 1.0
    assert finishes["is_verb"] == 1.0 and finishes["is_bos"] == 0.0
    assert the["is_object"] == 1.0 and sum(the.values()) == 1.0  # 'the' is only part of the object phrase
    assert very["is_object"] == 1.0 and very["str_med"] == 0.0  # strength is read at the adjective
    assert good["is_adj"] == 1.0 and good["is_object"] == 1.0 and good["is_head"] == 0.0
    assert good["pos_low"] == pytest.approx(pw(0.6, 0.2)) and good["pos_med"] == pytest.approx(1.0) and good["pos_high"] == pytest.approx(pw(0.6, 1.0))
    assert good["neg_low"] == good["neg_med"] == good["neg_high"] == 0.0
    # strength at 'good' comes from the preceding 'very' (0.8)
    assert good["str_low"] == pytest.approx(pw(0.8, 0.2)) and good["str_med"] == pytest.approx(pw(0.8, 0.6)) and good["str_high"] == pytest.approx(pw(0.8, 1.0))
    assert task["is_noun"] == task["is_head"] == task["is_object"] == 1.0 and task["str_med"] == 0.0
    assert dot["is_eos"] == 1.0 and dot["is_question"] == 0.0
    assert sum(v for k, v in dot.items() if k != "is_eos") == 0.0


def test_polarity_terms_match_the_power_formula(bank):
    ids = encode(bank, "excellent awful pleasant terrible slightly good extremely bad")
    x = bank.featurize(ids, roles_for(ids))
    cols = [bank.column(c) for c in ("pos_low", "pos_med", "pos_high", "neg_low", "neg_med", "neg_high", "str_low", "str_med", "str_high")]
    got = x[0][:, cols]
    want = [
        [pw(1.0, 0.2), pw(1.0, 0.6), 1.0, 0, 0, 0, pw(0.6, 0.2), 1.0, pw(0.6, 1.0)],  # excellent, no intensifier: 0.6
        [0, 0, 0, pw(1.0, 0.2), pw(1.0, 0.6), 1.0, pw(0.6, 0.2), 1.0, pw(0.6, 1.0)],  # awful: |-1.0|
        [pw(0.4, 0.2), pw(0.4, 0.6), pw(0.4, 1.0), 0, 0, 0, pw(0.6, 0.2), 1.0, pw(0.6, 1.0)],
        [0, 0, 0, pw(0.9, 0.2), pw(0.9, 0.6), pw(0.9, 1.0), pw(0.6, 0.2), 1.0, pw(0.6, 1.0)],
        [0] * 9,  # slightly
        [pw(0.6, 0.2), 1.0, pw(0.6, 1.0), 0, 0, 0, pw(0.2, 0.2), pw(0.2, 0.6), pw(0.2, 1.0)],  # good after slightly
        [0] * 9,  # extremely
        [0, 0, 0, pw(0.6, 0.2), 1.0, pw(0.6, 1.0), pw(1.0, 0.2), pw(1.0, 0.6), 1.0],  # bad after extremely
    ]
    torch.testing.assert_close(got, torch.tensor(want), rtol=1e-6, atol=1e-7)


def test_strength_reads_only_the_immediately_preceding_intensifier(bank):
    ids = encode(bank, "very the good task ! good")
    x = bank.featurize(ids, roles_for(ids))
    med = bank.column("str_med")
    assert x[0, 2, med].item() == pytest.approx(1.0)  # 'very' is two back: default 0.6
    assert x[0, 5, med].item() == pytest.approx(1.0)


def test_coreference_pronoun_and_capitalisation(bank):
    ids = encode(bank, "Alice finishes the task . He reviews the model . she")
    x = bank.featurize(ids, roles_for(ids, subject=[0, 5]))
    coref, pron, cap = (bank.column(c) for c in ("coref_subject", "is_pronoun", "is_capitalized"))
    assert x[0, :, coref].tolist() == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert x[0, :, pron].tolist() == [0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert x[0, :, cap].tolist() == [1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0]
    # a pronoun before any subject does not corefer
    ids = encode(bank, "He finishes the task")
    assert bank.featurize(ids, roles_for(ids, subject=[0]))[0, 0, coref] == 0


def test_boundaries_and_segments(bank):
    v = bank.vocab
    text = "<pad> <bos> He finishes , the task ? <eos> <bos> She starts the meal ."
    ids = torch.tensor([[v.id(w) for w in text.split()]])
    x = bank.featurize(ids, roles_for(ids, subject=[2]))
    col = {n: bank.column(n) for n in ("is_bos", "is_comma", "is_question", "is_eos", "coref_subject")}
    assert x[0, :, col["is_bos"]].nonzero().flatten().tolist() == [2, 10]  # first real token after each <bos>
    assert x[0, :, col["is_comma"]].nonzero().flatten().tolist() == [4]
    assert x[0, :, col["is_question"]].nonzero().flatten().tolist() == [7]
    assert x[0, :, col["is_eos"]].nonzero().flatten().tolist() == [7, 14]
    # 'She' comes after <bos>: the earlier subject belongs to another segment
    assert x[0, 10, col["coref_subject"]] == 0


def test_static_table(bank):
    t = bank.table
    assert t.shape == (len(bank.vocab), 23)
    good = t[bank.vocab.id("good")]
    assert good[bank.column("str_med")] == pytest.approx(1.0)  # default strength 0.6 without context
    assert good[bank.column("pos_med")] == pytest.approx(1.0)
    assert t[:, bank.column("is_bos")].sum() == 0 and t[:, bank.column("is_subject")].sum() == 0
    assert t[bank.vocab.id("Alice"), bank.column("is_capitalized")] == 1
    assert t[bank.vocab.id("<pad>")].sum() == 0


def test_term_words_for_the_fsg(bank):
    lex = bank.lexicon
    assert term_words(lex, "pos", "high", threshold=0.95) == ["wonderful", "excellent"]
    assert term_words(lex, "neg", "high", threshold=0.95) == ["terrible", "awful"]
    # power kernel 0.9 ** (|x - 0.2| / 0.35): pleasant (0.4) 0.942, good (0.6) 0.886, great (0.8) 0.835
    assert term_words(lex, "pos", "low", threshold=0.88) == ["pleasant", "good"]
    assert term_words(lex, "pos", "low", threshold=0.9) == ["pleasant"]
    assert lex.class_words("ADJ_POS") == ["good", "great", "excellent", "pleasant", "wonderful"]


# ---------------------------------------------------------------------- roles
def test_missing_role_is_named(bank):
    ids = encode(bank, "Alice finishes the task .")
    with pytest.raises(NeurosymError, match="feature is_subject, coref_subject needs role 'subject'"):
        bank.featurize(ids)
    roles = roles_for(ids)
    del roles["head"]
    with pytest.raises(NeurosymError, match="needs role 'head'"):
        bank.featurize(ids, roles)
    roles = roles_for(ids)
    roles["object"] = roles["object"][:, :3]
    with pytest.raises(NeurosymError, match="role 'object' has shape"):
        bank.featurize(ids, roles)


def test_float_roles_and_unbatched_ids(bank):
    ids = encode(bank, "Alice finishes the task .")
    roles = {k: v.float() * 0.9 for k, v in roles_for(ids, subject=[0]).items()}
    x = bank.featurize(ids, roles)
    assert x[0, 0, bank.column("is_subject")] == 1
    single = bank.featurize(ids[0], {k: v[0] for k, v in roles.items()})
    torch.testing.assert_close(single, x[0])
    with pytest.raises(NeurosymError, match=r"shape \(B, L\)"):
        bank.featurize(ids[None])


# ---------------------------------------------------------------------- causality
@pytest.fixture(scope="module")
def vader_bank() -> FeatureBank:
    return load_lexicon(ROOT / "tests" / "data" / "lex" / "small.lex")


@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_featurize_is_causal(bank, vader_bank, data):
    """Changing tokens (and roles) after t never changes the features at 0..t."""
    for b, with_roles in ((bank, True), (vader_bank, False)):
        V = len(b.vocab)
        B, L = data.draw(st.integers(1, 4)), data.draw(st.integers(2, 12))
        seed = data.draw(st.integers(0, 2**31 - 1))
        g = torch.Generator().manual_seed(seed)
        ids = torch.randint(0, V, (B, L), generator=g)
        t = data.draw(st.integers(0, L - 2))
        other = ids.clone()
        other[:, t + 1 :] = torch.randint(0, V, (B, L - t - 1), generator=g)
        roles = roles2 = None
        if with_roles:
            roles = {r: torch.rand(B, L, generator=g) < 0.3 for r in b.roles}
            roles2 = {r: x.clone() for r, x in roles.items()}
            for x in roles2.values():
                x[:, t + 1 :] = torch.rand(B, L - t - 1, generator=g) < 0.5
        a = b.featurize(ids, roles)
        c = b.featurize(other, roles2)
        assert torch.equal(a[:, : t + 1], c[:, : t + 1])


def test_strength_does_not_peek_at_the_final_punctuation(bank):
    a = encode(bank, "Bob cooks the good meal !")
    c = encode(bank, "Bob cooks the good meal .")
    xa, xc = bank.featurize(a, roles_for(a)), bank.featurize(c, roles_for(c))
    assert torch.equal(xa[:, :5], xc[:, :5])


# ---------------------------------------------------------------------- modifiers
def test_booster_and_negation_change_the_next_valued_word(vader_bank):
    b = vader_bank
    pol = b.column("polarity_pos")

    def value(text: str) -> float:
        x = b.featurize(torch.tensor(b.vocab.encode(text)))
        return x[-1, b.column("polarity_pos")].item() - x[-1, b.column("polarity_neg")].item()

    # triangular terms with centres -1, 0, 1: pos - neg recovers the value itself
    assert value("good") == pytest.approx(0.6)
    assert value("very good") == pytest.approx(0.85)  # + 0.25 * sign
    assert value("very bad") == pytest.approx(-0.85)
    assert value("very plain good") == pytest.approx(0.6)  # the booster's window is 1
    assert value("not good") == pytest.approx(-0.6)
    assert value("not plain plain good") == pytest.approx(-0.6)  # negation window 3
    assert value("not plain plain plain good") == pytest.approx(0.6)  # out of the window
    assert value("not very good") == pytest.approx(-0.85)
    assert value("not bad good") == pytest.approx(0.6)  # 'bad' took the negation
    assert value("very so-so") == pytest.approx(0.0)  # sign(0) = 0: nothing to boost
    assert pol >= 0


def test_vader_lexicon_modifiers(tmp_path):
    b = load_lexicon(ROOT / "lexicons" / "vader.lex")
    valence = b.column("valence")

    def v(text: str) -> float:
        return b.featurize(torch.tensor(b.vocab.encode(text)))[-1, valence].item()

    good = 1.9 / 4
    assert v("good") == pytest.approx(good)
    assert v("very good") == pytest.approx(good + 0.293 / 4)
    assert v("not good") == pytest.approx(-0.74 * good)
    assert v("not very good") == pytest.approx(-0.74 * (good + 0.293 / 4))


# ---------------------------------------------------------------------- vocabularies
def test_default_vocab_and_foreign_vocabularies():
    lex = parse_lexicon('%feature p range=-1..1\n%class ADJ good\n%feature f = value(p) where token("!") | class(ADJ)\ngood p=0.5\nBad p=-0.5\n')
    assert default_vocab(lex).tokens == ["<pad>", "<unk>", "<bos>", "<eos>", "good", "Bad", "!"]
    bpe = Vocab(["<pad>", "<bos>", "Ġgood", "Ġbad", "!"], [None, None, " good", " bad", "!"], "word")
    b = compile_lexicon(lex, bpe)
    assert b.table[:, 0].tolist() == [0.0, 0.0, 0.5, 0.0, 0.0]
    folded = compile_lexicon(lex, bpe, ignore_case=True)
    assert folded.lex_values[3, 0].item() == -0.5
    raw = Vocab([f"b{i}" for i in range(3)], [b"good", b"\xff", b"!"], "bytes")
    assert compile_lexicon(lex, raw).table[:, 0].tolist() == [0.5, 0.0, 0.0]


def test_lexical_columns_when_nothing_is_computed():
    lex = parse_lexicon("%feature p range=-1..1\n%feature s range=0..1 terms=lo,hi\nx p=0.5 s=1\n")
    b = compile_lexicon(lex)
    assert b.names == ["p", "s_lo", "s_hi"]
    assert b.featurize(torch.tensor([[b.vocab.id("x"), b.vocab.id("<unk>")]]))[0].tolist() == [[0.5, 0.0, 1.0], [0.0, 0.0, 0.0]]
    assert b.static("s").shape == (len(b.vocab), 2)
    assert "vocab_size" in b.summary() and b.summary()["columns"] == b.names


def test_shift_helper():
    x = torch.tensor([[1, 2, 3]])
    assert shift(x, 1).tolist() == [[0, 1, 2]] and shift(x, 5, 9).tolist() == [[9, 9, 9]] and shift(x, 0) is x


def test_load_accepts_limits_and_raw_formats():
    b = load_lexicon(ROOT / "lexicons" / "AFINN-en-165.txt", None, None, format="afinn")
    assert b.names == ["polarity", "valence_raw"] and len(b.lexicon.entries) == 3382
    assert b.table[b.vocab.id("good")].tolist() == pytest.approx([0.6, 3.0])
