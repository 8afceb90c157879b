"""GatedFusion, the control channel, AuxHead and make_batch, on the real recipe corpus
(grammars/clause.fsg) and features (lexicons/sentiment.lex)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import neurosym
from neurosym.errors import ConfigError, NeurosymError
from neurosym.lm import AuxHead, CausalLM, GatedFusion, LMConfig, build_fusion_lm, control_from_features, control_names, make_batch
from neurosym.lm.fusion import LexicalOutput, lexical_descriptions
from neurosym.lm.losses import aux_bce, label_smoothed_ce
from neurosym.experiments.semantic_fusion import CONTROL

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("one_thread")  # tiny tensors: extra threads only spin-wait on a busy machine


@pytest.fixture(scope="module")
def recipe():
    auto = neurosym.load(ROOT / "grammars" / "clause.fsg")
    bank = neurosym.load(ROOT / "lexicons" / "sentiment.lex", auto.vocab)
    return auto, bank


def featurize(auto, bank, ids: torch.Tensor) -> torch.Tensor:
    """Features of LM inputs ``<bos> w1 ..`` (any tokens): roles from the automaton on
    ``w1 ..`` shifted one right for ``<bos>``, then the bank (both causal)."""
    roles = {r: torch.cat([torch.zeros(ids.shape[0], 1, dtype=torch.bool), m], 1) for r, m in auto.roles(ids[:, 1:]).items()}
    return bank.featurize(ids, roles)


def config(auto, positions="sinusoidal") -> LMConfig:
    return LMConfig(vocab_size=len(auto.vocab), d_model=32, n_layers=2, n_heads=4, d_ff=64, max_len=32, positions=positions)


# ---------------------------------------------------------------------- the batch layout
def test_make_batch_layout(recipe):
    auto, bank = recipe
    sents = auto.sample(6, seed=1)
    b = make_batch(sents, auto, bank, control=CONTROL)
    v = auto.vocab.tokens
    bos, eos, pad = v.index("<bos>"), v.index("<eos>"), v.index("<pad>")
    L = max(map(len, sents)) + 1
    assert b["ids"].shape == b["targets"].shape == (6, L)
    for i, s in enumerate(sents):
        n = len(s)
        assert b["lengths"][i] == n + 1
        assert b["ids"][i, : n + 1].tolist() == [bos, *s] and set(b["ids"][i, n + 1 :].tolist()) <= {pad}
        assert b["targets"][i, : n + 1].tolist() == [*s, eos] and set(b["targets"][i, n + 1 :].tolist()) <= {pad}
    F = len(bank.names)
    assert b["features"].shape == b["aux_targets"].shape == (6, L, F)
    real = b["targets"] != pad
    assert torch.equal(b["features"][real], featurize(auto, bank, b["ids"])[real])
    assert b["features"][~real].eq(0).all() and b["aux_targets"][~real].eq(0).all()
    full = torch.cat([b["ids"], torch.full((6, 1), pad)], 1)
    full[torch.arange(6), b["lengths"]] = eos
    assert torch.equal(b["aux_targets"][real], featurize(auto, bank, full)[:, 1:][real])
    both = real[:, 1:] & real[:, :-1]
    assert torch.equal(b["aux_targets"][:, :-1][both], b["features"][:, 1:][both])
    # roles are aligned with the words: the first word is the subject, <bos> is nothing
    subj, bos_col = bank.column("is_subject"), bank.column("is_bos")
    assert b["features"][:, 1, subj].eq(1).all() and b["features"][:, 0, subj].eq(0).all()
    assert b["features"][:, 1, bos_col].eq(1).all()
    assert b["control"].shape == (6, len(control_names(bank.names, CONTROL)))
    with pytest.raises(NeurosymError, match="needs a feature bank"):
        make_batch(sents, auto, None, control=CONTROL)
    assert set(make_batch(sents, auto)) == {"ids", "targets", "lengths"}


# ---------------------------------------------------------------------- control
def test_control_names(recipe):
    _, bank = recipe
    names = control_names(bank.names, CONTROL)
    assert names == [f"max:{p}_{t}" for p in ("pos", "neg", "str") for t in ("low", "med", "high")] + ["final:is_eos", "final:is_question", "final:is_exclaim"]
    with pytest.raises(NeurosymError, match="is_question"):
        control_names(["pos_low", "is_eos"], CONTROL)


def test_control_from_features_by_hand():
    names = ["pos_a", "neg_a", "other", "is_eos", "is_question", "is_exclaim"]
    f = torch.zeros(2, 4, 6)
    f[0, :, 0] = torch.tensor([0.1, 0.7, 0.3, 0.9])  # 0.9 is past the length 3
    f[0, :, 2] = 1.0
    f[0, 2, 3] = 1.0  # the last valid position ends the sentence
    f[0, 3, 4] = 1.0  # past the end
    f[1, :, 1] = torch.tensor([0.2, 0.5, 0.4, 0.6])
    f[1, 3, 3:] = 1.0
    c = control_from_features(f, names, CONTROL, torch.tensor([3, 4]))
    assert torch.allclose(c, torch.tensor([[0.7, 0.0, 1.0, 0.0, 0.0], [0.0, 0.6, 1.0, 1.0, 1.0]]))
    assert torch.allclose(control_from_features(f, names, CONTROL), torch.tensor([[0.9, 0.0, 0.0, 1.0, 0.0], [0.0, 0.6, 1.0, 1.0, 1.0]]))
    assert control_from_features(f, names, CONTROL, [0, 1])[0].eq(0).all()


def test_gold_control_on_the_corpus(recipe):
    auto, bank = recipe
    sents = auto.sample(64, seed=2)
    b = make_batch(sents, auto, bank, control=CONTROL)
    cols = control_names(bank.names, CONTROL)
    tok = auto.vocab.tokens
    pos_words = {"good", "great", "excellent", "pleasant", "wonderful"}
    for i, s in enumerate(sents):
        words = [tok[t] for t in s]
        c = dict(zip(cols, b["control"][i].tolist()))
        assert c["final:is_eos"] == 1.0
        assert c["final:is_question"] == float(words[-1] == "?")
        assert c["final:is_exclaim"] == float(words[-1] == "!")
        has_pos = any(w in pos_words for w in words)
        assert (max(c["max:pos_low"], c["max:pos_med"], c["max:pos_high"]) > 0) == has_pos
        assert c["max:str_med"] > 0  # every clause has an adjective, hence a strength


# ---------------------------------------------------------------------- GatedFusion
def test_gated_fusion_formula_and_control_broadcast():
    torch.manual_seed(0)
    fusion = GatedFusion(n_features=5, d_model=8, n_control=2)
    e, s, c = torch.randn(3, 4, 8), torch.rand(3, 4, 5), torch.rand(3, 2)
    s2 = torch.cat([s, c[:, None, :].expand(3, 4, 2)], -1)  # s' = [s; c]
    assert torch.equal(fusion.signal(e, s, c), s2)
    u = s2 @ fusion.W_s.weight.T
    g = torch.sigmoid(torch.cat([e, s2], -1) @ fusion.W_g.weight.T + fusion.W_g.bias)
    assert torch.allclose(fusion(e, features=s, control=c), e + u + g * u, atol=1e-6)
    # no features, no control: the embedding passes through unchanged
    assert torch.equal(fusion(e, features=torch.zeros(3, 4, 5), control=torch.zeros(3, 2)), e)


def test_gated_fusion_input_checks():
    fusion = GatedFusion(5, 8)
    e = torch.randn(2, 3, 8)
    with pytest.raises(NeurosymError, match="needs features"):
        fusion(e)
    with pytest.raises(NeurosymError, match=r"features must be \(2, 3, 5\)"):
        fusion(e, features=torch.rand(2, 3, 4))
    # no control channel: control (and other inputs) are ignored
    assert torch.equal(fusion(e, features=torch.ones(2, 3, 5), control=torch.ones(2, 7), roles=None), fusion(e, features=torch.ones(2, 3, 5)))
    with pytest.raises(NeurosymError, match="control channel"):
        GatedFusion(5, 8, n_control=2)(e, features=torch.rand(2, 3, 5))
    with pytest.raises(NeurosymError, match=r"control must be \(2, 2\)"):
        GatedFusion(5, 8, n_control=2)(e, features=torch.rand(2, 3, 5), control=torch.rand(2, 3))
    with pytest.raises(ConfigError, match=r"GatedFusion\.n_features"):
        GatedFusion(0, 8)
    with pytest.raises(ConfigError, match=r"GatedFusion\.n_control"):
        GatedFusion(3, 8, n_control=-1)
    with pytest.raises(ConfigError, match=r"AuxHead\.hidden"):
        AuxHead(8, 3, hidden=0)


def test_gradient_flows_through_the_gate(recipe):
    auto, bank = recipe
    torch.manual_seed(0)
    model = build_fusion_lm(config(auto), len(bank.names), n_control=len(control_names(bank.names, CONTROL)))
    b = make_batch(auto.sample(8, seed=3), auto, bank, control=CONTROL)
    features = b["features"].clone().requires_grad_(True)
    out = model(b["ids"], features=features, control=b["control"])
    loss = label_smoothed_ce(out.logits, b["targets"]) + aux_bce(out.extras["aux"], b["aux_targets"], b["targets"] != 0)
    loss.backward()
    fusion = model.adapter
    for p in (fusion.W_g.weight, fusion.W_g.bias, fusion.W_s.weight):
        assert p.grad is not None and p.grad.abs().sum() > 0
    # the gate's columns that read the control receive gradient too
    assert fusion.W_g.weight.grad[:, -2:].abs().sum() > 0
    assert features.grad is not None and features.grad.abs().sum() > 0


# ---------------------------------------------------------------------- building and heads
def test_build_fusion_lm(recipe):
    auto, bank = recipe
    F = len(bank.names)
    model = build_fusion_lm(config(auto), F)
    assert isinstance(model, CausalLM) and isinstance(model.adapter, GatedFusion) and isinstance(model.heads["aux"], AuxHead)
    assert model.lm_head.weight is model.tok_emb.weight
    base = CausalLM(config(auto))
    assert model.num_parameters() > base.num_parameters()
    b = make_batch(auto.sample(4, seed=4), auto, bank)
    out = model(b["ids"], **{k: b[k] for k in ("features",)})
    aux = out.extras["aux"]
    assert aux.shape == b["features"].shape and ((aux > 0) & (aux < 1)).all()
    assert "aux" not in build_fusion_lm(config(auto), F, aux_hidden=None).heads


# ---------------------------------------------------------------------- causality with real features
@pytest.mark.parametrize("positions", ["sinusoidal", "rotary"])
@pytest.mark.parametrize("with_control", [False, True])
def test_fusion_model_is_causal_with_real_features(recipe, positions, with_control):
    auto, bank = recipe
    torch.manual_seed(1)
    n_control = len(control_names(bank.names, CONTROL)) if with_control else 0
    model = build_fusion_lm(config(auto, positions), len(bank.names), n_control=n_control).eval()
    b = make_batch(auto.sample(4, seed=5), auto, bank, control=CONTROL if with_control else None)
    ids = b["ids"]
    B, L = ids.shape
    V = len(auto.vocab)
    control = b.get("control")  # a sentence-level input, held fixed
    # for every t: redraw the tokens after t (from the vocabulary, so rows become any
    # strings, also ungrammatical ones) and recompute roles and features from scratch
    variants = [ids]
    for t in range(L):
        changed = ids.clone()
        changed[:, t + 1 :] = torch.randint(4, V, (B, L - 1 - t))
        variants.append(changed)
    all_ids = torch.cat(variants)
    feats = featurize(auto, bank, all_ids)
    inputs = {"features": feats}
    if with_control:
        inputs["control"] = control.repeat(L + 1, 1)
    with torch.no_grad():
        out = model(all_ids, **inputs)
    logits = out.logits.view(L + 1, B, L, V)
    aux = out.extras["aux"].view(L + 1, B, L, -1)
    feats = feats.view(L + 1, B, L, -1)
    real = b["targets"] != 0
    assert torch.equal(feats[0][real], b["features"][real])
    for t in range(L):
        assert torch.equal(feats[t + 1][:, : t + 1], feats[0][:, : t + 1]), t  # the features are causal
        assert torch.allclose(logits[t + 1][:, : t + 1], logits[0][:, : t + 1], atol=1e-6), t
        assert torch.allclose(aux[t + 1][:, : t + 1], aux[0][:, : t + 1], atol=1e-6), t
        if t < L - 2:
            assert not torch.allclose(logits[t + 1][:, t + 1 :], logits[0][:, t + 1 :], atol=1e-6), t


def test_features_change_the_prediction(recipe):
    auto, bank = recipe
    torch.manual_seed(0)
    model = build_fusion_lm(config(auto), len(bank.names)).eval()
    b = make_batch(auto.sample(4, seed=6), auto, bank)
    with torch.no_grad():
        a = model(b["ids"], features=b["features"]).logits
        z = model(b["ids"], features=torch.zeros_like(b["features"])).logits
    assert not torch.allclose(a, z, atol=1e-4)


# ---------------------------------------------------------------------- control dropout (issue 16.1)
def test_control_dropout_zeroes_whole_rows_at_the_rate_and_only_in_training():
    torch.manual_seed(0)
    B, F, C, p = 20_000, 3, 2, 0.1
    fusion = GatedFusion(F, 4, n_control=C, control_dropout=p)
    e, s = torch.zeros(B, 1, 4), torch.rand(B, 1, F)
    c = 0.5 + torch.rand(B, C)  # every entry > 0, so a zeroed row is recognisable
    got = fusion.train().signal(e, s, c)
    assert torch.equal(got[..., :F], s)  # the features are never dropped
    ctrl = got[:, 0, F:]
    dropped = ctrl.eq(0).all(-1)
    assert torch.equal(ctrl[~dropped], c[~dropped])  # kept rows unchanged, dropped rows wholly zero
    assert ctrl[dropped].eq(0).all() and not ctrl[~dropped].eq(0).any()
    sd = (p * (1 - p) / B) ** 0.5
    assert abs(dropped.float().mean().item() - p) < 5 * sd
    assert torch.equal(fusion.eval().signal(e, s, c)[:, 0, F:], c)  # eval mode: never dropped
    # no dropout: no random draw at all, so a model without it trains bit for bit as before
    plain = GatedFusion(F, 4, n_control=C).train()
    state = torch.get_rng_state()
    assert torch.equal(plain.signal(e, s, c)[:, 0, F:], c)
    assert torch.equal(torch.get_rng_state(), state)


def test_control_dropout_in_the_model_runs_exactly_the_dropped_rows_unconditioned(recipe):
    auto, bank = recipe
    torch.manual_seed(2)
    n_control = len(control_names(bank.names, CONTROL))
    cfg = LMConfig(vocab_size=len(auto.vocab), d_model=32, n_layers=2, n_heads=4, d_ff=64, max_len=32, dropout=0.0)
    model = build_fusion_lm(cfg, len(bank.names), n_control, aux_hidden=None, control_dropout=0.5)
    b = make_batch(auto.sample(64, seed=7), auto, bank, control=CONTROL)
    assert b["control"].sum(-1).gt(0).all()  # every gold control is nonzero
    seen = []
    drop = model.adapter.drop_control
    model.adapter.drop_control = lambda c: seen.append(drop(c)) or seen[-1]  # record what the adapter used
    with torch.no_grad():
        trained = model.train()(b["ids"], features=b["features"], control=b["control"]).logits
        with_c = model.eval()(b["ids"], features=b["features"], control=b["control"]).logits
        without = model(b["ids"], features=b["features"], control=torch.zeros_like(b["control"])).logits
    used = seen[0]
    dropped = used.eq(0).all(-1)
    assert 0 < int(dropped.sum()) < 64 and torch.equal(used[~dropped], b["control"][~dropped])
    assert torch.allclose(trained[dropped], without[dropped], atol=1e-6)
    assert torch.allclose(trained[~dropped], with_c[~dropped], atol=1e-6)
    assert not torch.allclose(with_c, without, atol=1e-4)  # the control matters, so the check has teeth


@pytest.mark.parametrize("p", [1.0, -0.1, True, "0.1"])
def test_control_dropout_is_checked(p):
    with pytest.raises(ConfigError, match=r"GatedFusion\.control_dropout"):
        GatedFusion(3, 8, n_control=2, control_dropout=p)


# ---------------------------------------------------------------------- lexical output (issue 16.2)
CONTEXT_FREE = ["is_noun", "is_verb", "is_adj", "is_eos", "is_comma", "is_question", "is_exclaim", "pos_low", "pos_med", "pos_high",
                "neg_low", "neg_med", "neg_high", "is_capitalized", "is_pronoun"]


def test_context_free_columns_equal_the_static_table_in_every_context(recipe):
    auto, bank = recipe
    assert bank.context_free_columns() == CONTEXT_FREE
    # the reference: featurize random token strings with random roles; a context-free
    # column equals the static table at every position, every other column somewhere not
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(4, len(auto.vocab), (400, 12), generator=g)
    ids[:, 0] = auto.vocab.tokens.index("<bos>")
    roles = {r: torch.rand(400, 12, generator=g) < 0.5 for r in bank.roles}
    feats = bank.featurize(ids, roles)  # (B, L, F)
    static = bank.table[ids]  # (B, L, F)
    for j, name in enumerate(bank.names):
        same = torch.equal(feats[..., j], static[..., j])
        assert same == (name in CONTEXT_FREE), name
    assert torch.equal(lexical_descriptions(bank), bank.table[:, [bank.column(c) for c in CONTEXT_FREE]])


def test_lexical_output_formula_and_zero_start(recipe):
    auto, bank = recipe
    torch.manual_seed(0)
    f = lexical_descriptions(bank)  # (V, F')
    out = LexicalOutput(f, 16)
    h, E = torch.randn(2, 3, 16), torch.randn(len(auto.vocab), 16)
    assert torch.equal(out(h, E), h @ E.T)  # W_o starts at zero: the tied model
    with torch.no_grad():
        out.W_o.normal_()
    by_hand = torch.einsum("bld,vd->blv", h, E + f @ out.W_o)  # logit(v) = h . (E[v] + W_o f(v))
    assert torch.allclose(out(h, E), by_hand, atol=1e-5)
    # in a model: the same logits as the tied model at the start, and W_o learns
    cfg = config(auto)
    torch.manual_seed(1)
    model = build_fusion_lm(cfg, len(bank.names), descriptions=f).eval()
    torch.manual_seed(1)
    tied = build_fusion_lm(cfg, len(bank.names)).eval()
    b = make_batch(auto.sample(4, seed=8), auto, bank)
    assert torch.equal(model(b["ids"], features=b["features"]).logits, tied(b["ids"], features=b["features"]).logits)
    label_smoothed_ce(model(b["ids"], features=b["features"]).logits, b["targets"]).backward()
    assert model.output.W_o.grad is not None and model.output.W_o.grad.abs().sum() > 0
    assert "output.descriptions" in model.state_dict()  # a checkpoint carries what the model was trained with
    with pytest.raises(NeurosymError, match="describes 39 words"):
        out(h, torch.randn(5, 16))
    with pytest.raises(ConfigError, match=r"LexicalOutput\.d_model"):
        LexicalOutput(f, 0)
