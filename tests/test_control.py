"""Controllable generation (issue 16.3-16.4): metrics on hand-made samples against
hand-computed values, each decoding setting's processors on a tiny random model, and
`neurosym eval` on a tiny run trained by `neurosym train`."""

from __future__ import annotations

import json
import math

import pytest
import torch
from click.testing import CliRunner

from neurosym.cli.main import main
from neurosym.compile.fsg import load_fsg
from neurosym.compile.lexicon import load_lexicon
from neurosym.data import shipped_file
from neurosym.decode import TokenBan, WithinClassMixture, check_no_dead_end
from neurosym.errors import NeurosymError
from neurosym.experiments.control import (
    SETTINGS, PaperSampler, Request, banned_tokens, confusion, control_block, control_spec, decode, distinct_2,
    evaluate_recipe, format_control,
    grammaticality, measure, measure_generations, ood_hits, polarity_accuracy, processors, punct_accuracy,
    realised_polarity, realised_punct, request_controls, same_controls, sampler_share,
)
from neurosym.experiments.semantic_fusion import CONTROL
from neurosym.lm.fusion import build_fusion_lm, control_names
from neurosym.lm.model import CausalLM, LMConfig
from tiny_runs import CONTROL_LINES, tiny_fusion_config

FSG = load_fsg(shipped_file("grammars/clause.fsg"))
BANK = load_lexicon(shipped_file("lexicons/sentiment.lex"), FSG.vocab)
VOCAB = FSG.vocab
SPEC = control_spec(FSG, BANK.lexicon, held_out=["good", "great", "bad"])


def ids(text: str) -> list[int]:
    return VOCAB.encode(text) if text else []


# six hand-made samples and what each realises (see the comments)
SAMPLES = [
    ("Alice cooks the good task .", Request("pos", ".")),  # pos, '.', grammatical; good: held-out pos
    ("Bob cooks the awful meal !", Request("pos", "!")),  # neg, '!', grammatical
    ("Eve trains the very pleasant model ? She cooks the bad paper ?", Request("neg", "?")),  # mixed: other, '?', grammatical; bad: held-out neg
    ("Dave starts the task .", Request("neg", ".")),  # no adjective: other, '.', ungrammatical
    ("Carol cooks the great meal", Request("pos", "?")),  # pos, no punctuation, ungrammatical; great: held-out pos
    ("", Request("neg", "!")),  # empty: other, none, ungrammatical
]
TOKENS = [ids(t) for t, _ in SAMPLES]
REQUESTS = [r for _, r in SAMPLES]


# ---------------------------------------------------------------------- the spec
def test_spec_reads_polarity_words_punctuation_and_held_out_words_from_the_lexicon():
    assert [VOCAB.tokens[t] for t in SPEC.words["pos"]] == ["good", "great", "excellent", "pleasant", "wonderful"]
    assert [VOCAB.tokens[t] for t in SPEC.words["neg"]] == ["bad", "poor", "terrible", "unpleasant", "awful"]
    assert [VOCAB.tokens[t] for t in SPEC.punctuation] == [".", "!", "?"]
    assert {p: [VOCAB.tokens[t] for t in ws] for p, ws in SPEC.held_out.items()} == {"pos": ["good", "great"], "neg": ["bad"]}
    assert [str(r) for r in SPEC.requests()] == ["pos .", "pos !", "pos ?", "neg .", "neg !", "neg ?"]


def test_spec_errors_name_the_bad_input():
    with pytest.raises(NeurosymError, match="'the'.*no 'polarity' value"):
        control_spec(FSG, BANK.lexicon, held_out=["the"])
    with pytest.raises(NeurosymError, match="';': not in the grammar's vocabulary"):
        control_spec(FSG, BANK.lexicon, punctuation=[".", ";"])
    with pytest.raises(NeurosymError, match="distinct"):
        control_spec(FSG, BANK.lexicon, punctuation=[".", "."])
    with pytest.raises(NeurosymError, match="a negative 'strength' value"):
        control_spec(FSG, BANK.lexicon, feature="strength")  # intensifiers have positive strengths, nothing a negative one
    with pytest.raises(NeurosymError, match="polarity must be one of pos, neg"):
        processors("hard", Request("neutral", "."), SPEC, VOCAB.id("<eos>"))
    with pytest.raises(NeurosymError, match=r"punctuation must be one of \. ! \?"):
        processors("hard", Request("pos", ","), SPEC, VOCAB.id("<eos>"))
    with pytest.raises(NeurosymError, match="unknown setting 'loose'"):
        processors("loose", Request("pos", "."), SPEC, VOCAB.id("<eos>"))


# ---------------------------------------------------------------------- metrics, by hand
def test_each_sample_is_read_as_hand_labelled():
    assert [realised_polarity(t, SPEC) for t in TOKENS] == ["pos", "neg", "other", "other", "pos", "other"]
    assert [realised_punct(t, SPEC) for t in TOKENS] == [".", "!", "?", ".", None, None]


def test_accuracies_equal_hand_counts():
    assert polarity_accuracy(TOKENS, REQUESTS, SPEC) == 2 / 6  # samples 1 and 5
    assert punct_accuracy(TOKENS, REQUESTS, SPEC) == 4 / 6  # samples 1 to 4


def test_confusion_matrix_equals_hand_counts():
    assert confusion(TOKENS, REQUESTS, SPEC) == {
        "pos": {"pos": 2, "neg": 1, "other": 0},  # samples 1, 5 | 2
        "neg": {"pos": 0, "neg": 0, "other": 3},  # samples 3 (mixed), 4 (none), 6 (empty)
    }


def test_ood_hits_count_polarity_words_of_the_samples_that_request_each_class():
    # pos requests: good, awful, great -> 2 held-out pos of 3; neg requests: pleasant, bad -> 1 of 2
    assert ood_hits(TOKENS, REQUESTS, SPEC) == {"pos": {"hits": 2, "words": 3, "rate": 2 / 3}, "neg": {"hits": 1, "words": 2, "rate": 0.5}}
    # a held-out word of the *other* class is a miss; no polarity word at all: rate None
    assert ood_hits([ids("Bob cooks the bad meal .")], [Request("pos", ".")], SPEC)["pos"] == {"hits": 0, "words": 1, "rate": 0.0}
    assert ood_hits([ids("Bob cooks the bad meal .")], [Request("pos", ".")], SPEC)["neg"] == {"hits": 0, "words": 0, "rate": None}


def test_sampler_share_is_alpha_times_held_out_over_class():
    assert sampler_share(0.3, SPEC) == pytest.approx({"pos": 0.3 * 2 / 5, "neg": 0.3 * 1 / 5})
    assert sampler_share(0.0, SPEC) == {"pos": 0.0, "neg": 0.0}


def test_grammaticality_is_the_fraction_the_fsg_accepts():
    assert grammaticality(TOKENS, FSG) == 3 / 6


@pytest.mark.parametrize("samples, expected", [
    ([[1, 2, 3], [1, 2], [3]], 2 / 3),  # (1,2) twice, (2,3) once
    ([[1, 2], [3, 4]], 1.0),  # (2,3) spans two samples: not a bigram
    ([[4, 4, 4]], 1 / 2),  # (4,4) twice inside one sample
    ([[5], []], 0.0),  # no bigram at all
    ([], 0.0),
])
def test_distinct_2_edge_cases(samples, expected):
    assert distinct_2(samples) == expected


def test_measure_bundles_the_metrics_and_refuses_mismatched_input():
    m = measure(TOKENS, REQUESTS, SPEC, alpha=0.5)
    assert m["samples"] == 6 and m["polarity_acc"] == 2 / 6 and m["punct_acc"] == 4 / 6 and m["grammatical"] == 0.5
    assert m["sampler_share"] == pytest.approx({"pos": 0.2, "neg": 0.1})
    with pytest.raises(NeurosymError, match="6 samples but 5 requests"):
        polarity_accuracy(TOKENS, REQUESTS[:5], SPEC)
    with pytest.raises(NeurosymError, match="no samples"):
        confusion([], [], SPEC)


# ---------------------------------------------------------------------- control vectors
def test_request_controls_by_hand():
    sentences = [ids("Alice cooks the good task ."), ids("Bob cooks the great meal !"), ids("Dave starts the awful task ?"),
                 ids("Eve trains the bad model . She cooks the good paper !")]  # the last is mixed: not used
    controls = request_controls(sentences, FSG, BANK, CONTROL, SPEC)
    names = control_names(BANK.names, CONTROL)
    col = {n: i for i, n in enumerate(names)}
    static = {w: BANK.table[VOCAB.id(w)] for w in ("good", "great", "awful")}  # context-free memberships
    for p in ("low", "med", "high"):
        f = BANK.names.index(f"pos_{p}")
        # pos requests average the two positive sentences, whatever punctuation they end in
        for punct in ".!?":
            assert float(controls[Request("pos", punct)][col[f"max:pos_{p}"]]) == pytest.approx(float(static["good"][f] + static["great"][f]) / 2, abs=1e-6)
            assert float(controls[Request("pos", punct)][col[f"max:neg_{p}"]]) == 0.0
            g = BANK.names.index(f"neg_{p}")
            assert float(controls[Request("neg", punct)][col[f"max:neg_{p}"]]) == pytest.approx(float(static["awful"][g]), abs=1e-6)
    for r, c in controls.items():
        assert float(c[col["final:is_eos"]]) == 1.0 and float(c[col["final:is_question"]]) == (1.0 if r.punct == "?" else 0.0)
        assert float(c[col["final:is_exclaim"]]) == (1.0 if r.punct == "!" else 0.0)
    # the recipe's columns tell every request apart
    assert same_controls(controls) == []
    with pytest.raises(NeurosymError, match="polarity neg"):
        request_controls(sentences[:2], FSG, BANK, CONTROL, SPEC)


# ---------------------------------------------------------------------- settings
def tiny_model(control: int = 0) -> CausalLM:
    torch.manual_seed(0)
    cfg = LMConfig(vocab_size=len(VOCAB), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=32)
    return (build_fusion_lm(cfg, len(BANK.names), control, aux_hidden=None) if control else CausalLM(cfg)).eval()


def test_token_ban_and_dead_ends():
    ban = TokenBan([3, 5], 8)
    scores = ban(torch.zeros(2, 8))
    assert torch.isinf(scores[:, [3, 5]]).all() and (scores[:, [0, 1, 2, 4, 6, 7]] == 0).all()
    assert ban.allowed(torch.tensor([3, 4])).tolist() == [False, True]
    assert [VOCAB.tokens[t] for t in banned_tokens(Request("pos", "!"), SPEC)] == ["bad", "poor", "terrible", "unpleasant", "awful", ".", "?"]
    check_no_dead_end(FSG, banned_tokens(Request("neg", "?"), SPEC))  # clause.fsg keeps a way to end
    with pytest.raises(NeurosymError, match="without a way to end"):
        check_no_dead_end(FSG, list(SPEC.punctuation))  # no sentence can end without punctuation


def test_soft_is_the_control_only_and_a_baseline_ignores_it():
    assert processors("soft", Request("pos", "."), SPEC, VOCAB.id("<eos>")) == []
    model = tiny_model()
    pos = {r: torch.ones(11) for r in SPEC.requests()}
    zero = {r: torch.zeros(11) for r in SPEC.requests()}
    a = decode(model, "soft", SPEC, 8, 0, pos, requests=[Request("pos", ".")])
    b = decode(model, "soft", SPEC, 8, 0, zero, requests=[Request("pos", ".")])
    assert a[Request("pos", ".")].tokens == b[Request("pos", ".")].tokens
    fusion = tiny_model(control=11)
    with torch.no_grad():  # make the control matter in the random model
        fusion.adapter.W_s.weight.mul_(50)
    a = decode(fusion, "soft", SPEC, 8, 0, pos, BANK, max_len=10, requests=[Request("pos", ".")])
    b = decode(fusion, "soft", SPEC, 8, 0, zero, BANK, max_len=10, requests=[Request("pos", ".")])
    assert a[Request("pos", ".")].tokens != b[Request("pos", ".")].tokens
    with pytest.raises(NeurosymError, match="control channel"):
        decode(fusion, "soft", SPEC, 2, 0, None, BANK)
    with pytest.raises(NeurosymError, match="feature bank"):
        decode(fusion, "soft", SPEC, 2, 0, pos)


def test_soft_mask_keeps_every_sample_grammatical():
    gens = decode(tiny_model(), "soft-mask", SPEC, 100, 0, requests=[Request("pos", "!"), Request("neg", "?")])
    tokens = [t for g in gens.values() for t in g.tokens]
    assert len(tokens) == 200 and grammaticality(tokens, FSG) == 1.0


def test_hard_gives_the_requested_polarity_and_punctuation_every_time():
    requests = [Request("pos", "!"), Request("neg", "?")]
    gens = decode(tiny_model(), "hard", SPEC, 100, 0, requests=requests)
    m = measure_generations(gens, SPEC)
    assert m["samples"] == 200 and m["polarity_acc"] == 1.0 and m["punct_acc"] == 1.0 and m["grammatical"] == 1.0
    assert m["status"] == {"eos": 200}
    for r, g in gens.items():  # two-clause samples too: every punctuation mark and adjective is the requested kind
        assert {realised_polarity(row, SPEC) for row in g.tokens} == {r.polarity}
        puncts = {VOCAB.tokens[t] for row in g.tokens for t in row if t in SPEC.punctuation}
        assert puncts == {r.punct}


def test_paper_sampler_with_alpha_one_draws_adjectives_uniformly_from_the_class():
    requests = [Request("pos", "."), Request("neg", "!")]
    gens = decode(tiny_model(), "paper", SPEC, 100, 0, paper=PaperSampler(alpha=1.0, temperature=1.0, top_p=1.0), requests=requests)
    m = measure_generations(gens, SPEC, alpha=1.0)
    assert m["polarity_acc"] == 1.0 and m["punct_acc"] == 1.0 and m["grammatical"] == 1.0
    # every adjective is uniform over the requested class: held-out share 2/5 (pos), 1/5 (neg); binomial sd < 0.04
    assert m["ood_hit"]["pos"]["rate"] == pytest.approx(2 / 5, abs=0.1)
    assert m["ood_hit"]["neg"]["rate"] == pytest.approx(1 / 5, abs=0.1)
    assert m["sampler_share"] == {"pos": 2 / 5, "neg": 1 / 5}
    chain = processors("paper", Request("pos", "."), SPEC, VOCAB.id("<eos>"), paper=PaperSampler(alpha=0.25))
    assert [type(p).__name__ for p in chain] == ["GrammarMask", "TokenBan", "WithinClassMixture"]
    assert chain[2].alpha == 0.25 and chain[2].ids.tolist() == list(SPEC.words["pos"])
    chain = processors("paper", Request("pos", "."), SPEC, VOCAB.id("<eos>"), paper=PaperSampler(alpha=0.25, within_class=False))
    assert [type(p).__name__ for p in chain] == ["GrammarMask", "TokenBan", "ClassMixture"]


def test_within_class_mixture_by_hand():
    inf = float("-inf")
    scores = torch.tensor([[0.8, 0.2, 0.0, 0.0], [0.8, 0.1, 0.1, 0.0]]).log()
    scores[0, 2:] = inf  # row 0: only the class {0, 1} is allowed: the plain mixture
    scores[1, 3] = inf  # row 1: token 2 (not in the class) competes; the class keeps its mass 0.9
    out = WithinClassMixture([0, 1], alpha=0.5)(scores.clone()).exp()
    assert torch.allclose(out[0], torch.tensor([0.5 * 0.8 + 0.25, 0.5 * 0.2 + 0.25, 0.0, 0.0]))
    assert torch.allclose(out[1], torch.tensor([0.5 * 0.8 + 0.5 * 0.45, 0.5 * 0.1 + 0.5 * 0.45, 0.1, 0.0]))  # 0.625, 0.275, 0.1
    # temperature 2, then nucleus 0.7: q = sqrt(p) normalised = 0.586, 0.207, 0.207; class mass 0.793
    out = WithinClassMixture([0, 1], alpha=0.5, T=2.0, top_p=0.7)(scores.clone()).exp()
    q = torch.tensor([0.8, 0.1, 0.1]).sqrt()
    q = q / q.sum()
    mixed = [0.5 * q[0] + 0.25 * (q[0] + q[1]), 0.5 * q[1] + 0.25 * (q[0] + q[1]), q[2]]  # 0.491, 0.302, 0.207
    assert torch.allclose(out[1], torch.tensor([mixed[0], mixed[1], 0.0, 0.0]))  # the third starts after 0.793 >= 0.7


def test_seeds_reproduce_samples():
    model, r = tiny_model(), [Request("neg", ".")]
    a = decode(model, "paper", SPEC, 20, 3, requests=r)[r[0]].tokens
    assert decode(model, "paper", SPEC, 20, 3, requests=r)[r[0]].tokens == a
    assert decode(model, "paper", SPEC, 20, 4, requests=r)[r[0]].tokens != a


def test_paper_sampler_refuses_bad_values():
    for bad in ({"alpha": 1.5}, {"temperature": 0.0}, {"top_p": 0.0}):
        with pytest.raises(NeurosymError):
            PaperSampler(**bad)


# ---------------------------------------------------------------------- neurosym eval


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    folder = tmp_path_factory.mktemp("control")
    cfg = folder / "tiny.toml"
    cfg.write_text(tiny_fusion_config(folder, holdout=2, run="threads = 1", model=CONTROL_LINES))
    result = CliRunner().invoke(main, ["train", str(cfg)])
    assert result.exit_code == 0, result.output
    return folder / "tiny"


def test_eval_prints_the_table_and_valid_json(run_dir):
    args = ["eval", str(run_dir), "-n", "3", "--settings", "soft,hard,paper", "--seed", "1", "--alpha", "0.5"]
    result = CliRunner().invoke(main, [*args, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["kind"] == "fusion" and report["control_input"] is True  # trained with its control channel
    assert list(report["settings"]) == ["soft", "hard", "paper"]
    assert report["same_control"] == []  # the recipe's control has a column for each punctuation
    assert {p: len(ws) for p, ws in report["held_out"].items()} == {"pos": 2, "neg": 2}
    for s, m in report["settings"].items():
        assert m["samples"] == 18 and sum(sum(row.values()) for row in m["confusion"].values()) == 18
    hard, paper = report["settings"]["hard"], report["settings"]["paper"]
    assert hard["polarity_acc"] == hard["punct_acc"] == hard["grammatical"] == 1.0
    assert paper["sampler_share"] == {"pos": 0.5 * 2 / 5, "neg": 0.5 * 2 / 5} and hard["sampler_share"] == {"pos": 0.0, "neg": 0.0}
    text = CliRunner().invoke(main, ["eval", str(run_dir), "-n", "2", "--settings", "hard"])
    assert text.exit_code == 0, text.output
    assert "| setting | polarity acc | punct acc | grammatical | distinct-2 |" in text.output
    assert "| hard | 1.000 | 1.000 | 1.000 |" in text.output
    assert "same control vector" not in text.output and "pos . = pos !" not in text.output
    bad = CliRunner().invoke(main, ["eval", str(run_dir), "--settings", "soft,loose"])
    assert bad.exit_code == 2 and "--settings" in bad.output


def test_eval_without_settings_gives_the_runs_perplexities(run_dir):
    """A recipe run is a run of the built-in lm task: plain `neurosym eval RUN` gives its
    perplexities on the split (--settings asks for controllable decoding instead)."""
    for split in ("valid", "test"):
        result = CliRunner().invoke(main, ["eval", str(run_dir), "--split", split, "--json"])
        assert result.exit_code == 0, result.output
        report = json.loads(result.output)
        assert report["split"] == split and report["tokens"] > 0 and report["ppl"] >= report["floor_ppl"] > 1
        assert math.isfinite(report["seen_ppl"]) and math.isfinite(report["focus_ce"]) and "sem_mse" in report


def test_same_controls_groups_requests_the_control_cannot_tell_apart():
    a, b = torch.tensor([1.0, 0.0]), torch.tensor([1.0, 1.0])
    controls = {Request("pos", "."): a, Request("pos", "!"): a.clone(), Request("pos", "?"): b, Request("neg", "."): b.clone()}
    assert [[str(r) for r in g] for g in same_controls(controls)] == [["pos .", "pos !"], ["pos ?", "neg ."]]


# ---------------------------------------------------------------------- the recipe's control tables
@pytest.mark.usefixtures("one_thread")
def test_evaluate_recipe_adds_the_control_block_and_reuses_it(tmp_path):
    from neurosym.experiments.semantic_fusion import reproduce

    tiny = {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "aux_hidden": 16}
    report = reproduce(seeds=2, out_dir=tmp_path, epochs=1, progress=None, model=tiny, train=128, valid=32,
                       variants=("baseline", "fusion-control"), threads=1, timing=False)
    said: list[str] = []
    evaluate_recipe(report, samples=12, paper=PaperSampler(alpha=0.5), progress=said.append)
    assert len(said) == 4  # two models x two seeds decoded
    for v in ("baseline", "fusion-control"):
        runs, block = report[v]["runs"], report[v]["control"]
        assert block["seeds"] == 2
        for r in runs:
            assert set(r["control"]["settings"]) == set(SETTINGS)
            assert all(m["samples"] == 12 for m in r["control"]["settings"].values())  # 2 per request x 6 requests
        assert block["hard"]["polarity_acc"] == block["hard"]["punct_acc"] == 1.0 and block["hard"]["polarity_acc_std"] == 0.0
        soft = [r["control"]["settings"]["soft"]["polarity_acc"] for r in runs]
        assert block["soft"]["polarity_acc"] == pytest.approx(sum(soft) / 2)
        assert block["soft"]["polarity_acc_std"] == pytest.approx(abs(soft[0] - soft[1]) / 2 ** 0.5)
        assert block["grammatical_masked"] == 1.0 and block["grammatical"] == pytest.approx(
            sum(r["control"]["settings"]["soft"]["grammatical"] for r in runs) / 2)
        held = {p: len(report["holdout"][f"ADJ_{p.upper()}"]) for p in ("pos", "neg")}
        assert block["ood_hit"]["sampler_share"] == {p: 0.5 * held[p] / 5 for p in ("pos", "neg")}
        assert block["ood_hit"]["sampler_baseline"] == pytest.approx(0.5 * (held["pos"] + held["neg"]) / 10)
        own = [r["control"]["settings"]["soft"]["ood_hit"]["pos"]["rate"] for r in runs]
        if None not in own:
            assert block["ood_hit_model"]["pos"] == pytest.approx(sum(own) / 2)
    table = format_control(report)
    assert "| baseline |" in table and "| fusion-control |" in table and "sampler alone" in table
    json.dumps(report)  # the report stays JSON
    said.clear()
    again = evaluate_recipe(report, samples=12, paper=PaperSampler(alpha=0.5), progress=said.append)
    assert said == [] and again["fusion-control"]["control"] == report["fusion-control"]["control"]  # reused from control.json
    evaluate_recipe(report, samples=6, paper=PaperSampler(alpha=0.5), progress=said.append)
    assert len(said) == 4  # other settings: decoded again


def test_control_block_refuses_missing_settings():
    with pytest.raises(NeurosymError, match="no evaluation"):
        control_block([])
    with pytest.raises(NeurosymError, match="missing paper"):
        control_block([{"settings": {s: {} for s in SETTINGS if s != "paper"}}])


def test_reproduce_cli_chooses_variants_and_refuses_bad_ones(tmp_path):
    bad = CliRunner().invoke(main, ["reproduce", "semantic-fusion", "--variants", "fusion,bogus", "--out-dir", str(tmp_path)])
    assert bad.exit_code != 0 and "bogus" in bad.output and "fusion-lexical" in bad.output and "Traceback" not in bad.output
    both = CliRunner().invoke(main, ["reproduce", "semantic-fusion", "--variants", "fusion", "--ablation", "--out-dir", str(tmp_path)])
    assert both.exit_code == 2 and "--variants" in both.output


# ---------------------------------------------------------------------- control targets and the grammar leak (issue 30 point 5)
def fake_report(values: dict[str, list[tuple]]) -> dict:
    """A decoded reproduce report with only what control_targets reads: per variant, per
    seed (ppl, soft polarity, soft punct, soft grammatical, held-out pos rate, neg rate)."""
    report = {"floor_ppl": 4.0, "variants": list(values)}
    for v, rows in values.items():
        report[v] = {"runs": [{"ppl": ppl, "control": {"settings": {"soft": {
            "polarity_acc": pol, "punct_acc": pun, "grammatical": gr,
            "ood_hit": {"pos": {"rate": hp}, "neg": {"rate": hn}}}}}} for ppl, pol, pun, gr, hp, hn in rows]}
    return report


def test_control_targets_by_hand():
    from scipy import stats

    from neurosym.experiments.control import TARGETS, control_targets, format_targets

    report = fake_report({
        "b": [(4.4, 0.3, 0.2, 0.95, 0.1, None), (4.2, 0.4, 0.3, 0.99, 0.2, 0.1), (4.3, 0.35, 0.25, 0.97, 0.3, 0.2)],
        "f": [(4.1, 0.96, 0.99, 0.995, 0.6, 0.5), (4.15, 0.95, 0.97, 0.99, 0.55, 0.7), (4.19, 0.97, 0.94, 1.0, 0.5, 0.49)],
    })
    t = control_targets(report, reference="b")
    assert report["targets"] is t and t["targets"] == TARGETS
    f, b = t["variants"]["f"], t["variants"]["b"]
    assert f["ppl_over_floor"]["runs"] == pytest.approx([0.025, 0.0375, 0.0475]) and f["ppl_over_floor"]["met"]
    assert not b["ppl_over_floor"]["met"]
    assert f["soft_polarity"]["met"] and f["soft_polarity"]["mean"] == pytest.approx(0.96)
    assert f["soft_polarity"]["std"] == pytest.approx(0.01)
    assert not f["soft_punct"]["met"]  # one seed at 0.94
    assert f["soft_grammatical"]["met"] and not b["soft_grammatical"]["met"]
    assert f["held_out_pos"]["met"] and not f["held_out_neg"]["met"]  # 0.49 < 0.5
    assert b["held_out_neg"]["runs"] == [None, 0.1, 0.2] and not b["held_out_neg"]["met"] and b["held_out_neg"]["mean"] == pytest.approx(0.15)
    expected = stats.ttest_ind([0.96, 0.95, 0.97], [0.3, 0.4, 0.35], equal_var=False)
    assert f["soft_polarity"]["welch"]["p"] == pytest.approx(expected.pvalue) and "welch" not in b["soft_polarity"]
    table = format_targets(report)
    assert "| f | soft polarity | 0.960 / 0.950 / 0.970 | 0.960 ± 0.010 | ≥ 0.95 | yes |" in table
    assert "| f | soft punctuation | 0.990 / 0.970 / 0.940 |" in table and "| b | held-out adjectives, model alone, neg | — / 0.100 / 0.200 |" in table


@pytest.mark.usefixtures("one_thread")
@pytest.mark.parametrize("variant", ["baseline-ctl", "fusion-ctl"])
def test_off_grammar_mass_equals_a_position_by_position_reference(variant):
    """The vectorised leak equals a loop over sentences and positions that asks the
    automaton token by token (one forward pass per prefix), on a tiny random model."""
    from neurosym.experiments.control import off_grammar_mass
    from neurosym.experiments.semantic_fusion import recipe_config
    from neurosym.lm.task import LMTask

    tiny = {"d_model": 32, "n_layers": 1, "n_heads": 2, "d_ff": 64, "aux_hidden": 16}
    task = LMTask(recipe_config(variant, 0, model=tiny, threads=1, train=32, valid=24, test=8))
    torch.manual_seed(0)
    model = task.build_model(None).eval()
    got = off_grammar_mass(model, task)
    auto, vocab = task.auto, task.auto.vocab
    eos, bos = vocab.id("<eos>"), vocab.id("<bos>")
    held = {vocab.id(w) for ws in task.holdout.values() for w in ws}
    sums = {"after_held_out": [0.0, 0], "elsewhere": [0.0, 0]}
    clean = []
    for sentence in task.sentences("valid"):
        batch = next(iter(type(task).sentence_batches(_OneSentence(task, sentence), "valid")))
        path = 1.0
        state = auto.start
        for t in range(len(sentence) + 1):
            prefix = {k: v[:, : t + 1] for k, v in batch.items() if k in ("ids", "features")}
            inputs = {k: v for k, v in prefix.items() if k != "ids" and model.adapter is not None}
            if "control" in batch and model.adapter is not None:
                inputs["control"] = batch["control"]
            with torch.no_grad():
                p = model(prefix["ids"], **inputs).logits[0, -1].double().softmax(-1)
            allowed = [tok for tok in range(len(vocab)) if tok != eos and state >= 0 and auto.next_state(state, tok) >= 0]
            if state >= 0 and bool(auto.final[state]):
                allowed.append(eos)
            off = 1.0 - float(p[allowed].sum())
            previous = bos if t == 0 else sentence[t - 1]
            sums["after_held_out" if previous in held else "elsewhere"][0] += off
            sums["after_held_out" if previous in held else "elsewhere"][1] += 1
            path *= 1 - off
            if t < len(sentence):
                state = auto.next_state(state, sentence[t])
        clean.append(path)
    for k, (total, n) in sums.items():
        assert got[k]["positions"] == n
        assert got[k]["mass"] == pytest.approx(total / n, abs=1e-5) if n else got[k]["mass"] is None
    assert got["clean_path"] == pytest.approx(sum(clean) / len(clean), abs=1e-5)
    assert got["elsewhere"]["positions"] > 0 and 0 < got["elsewhere"]["mass"] < 1


class _OneSentence:
    """A task whose valid split is one sentence (to reuse the task's own batching in the reference)."""

    def __init__(self, task, sentence):
        self.__dict__.update(task.__dict__)
        self.sentences = lambda split: [sentence]


def test_off_grammar_diagnostic_refuses_a_missing_run_without_a_traceback(tmp_path, capsys):
    from neurosym.experiments.control import main

    with pytest.raises(SystemExit) as stop:
        main([str(tmp_path / "no-run")])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and "no-run" in err and "Traceback" not in err
