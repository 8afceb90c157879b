"""The NumPy and tensor paths of the state-tracking processors agree exactly.

`GrammarMask` and `FSGPrior` keep CPU rows' states as NumPy arrays (``backend="auto"``
or ``"numpy"``) and the tensor path for accelerators (``backend="torch"``, forced here on
the CPU). Along seeded random walks over a byte-level BPE trained here (with non-ASCII
text, so tokens end inside characters), a word vocabulary and a character vocabulary,
batched and unbatched, with and without a completion budget, with rows that end (and
then get padding with ``done``) and rows that take a rejected token: the masked scores,
the states, the steps, ``allowed``, ``allowed_matrix``, the priors' log-probabilities
and whole generations must be the same under both backends.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import neurosym
from neurosym.compile import automaton as automaton_module
from neurosym.compile.fsg import load_fsg
from neurosym.compile.regex import compile_regex
from neurosym.data import shipped_file
from neurosym.decode import FSGPrior, GrammarMask, generate
from neurosym.decode import mask as mask_module
from neurosym.decode.mask import StateTracker
from neurosym.errors import NeurosymError
from neurosym.lm.model import CausalLM, LMConfig
from neurosym.vocab import Vocab

pytestmark = pytest.mark.usefixtures("one_thread")

CHARS = Vocab.chars([chr(i) for i in range(32, 127)])
UNICODE_TEXT = ["café naïve über straße – 10 € · 20 £ · 30 ¥", "日本語のテキスト 😀 🎉 ✓ ✗", "Ελληνικά και русский текст"] * 20
UNICODE_PATTERN = r"(café|naïve|über|[a-zé]+)( ([0-9]+ [€£¥]|😀|🎉|日本語))*"


@pytest.fixture(scope="module")
def bpe() -> Vocab:
    """A byte-level BPE trained here on the shipped grammars and some non-ASCII text (no
    download), with <pad> <unk> <bos> <eos> as special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    text = [p.read_text(encoding="utf-8") for p in sorted(shipped_file("grammars/dates.regex").parent.glob("*.*")) if p.suffix in (".regex", ".fsg", ".pcfg")]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=700, special_tokens=["<pad>", "<unk>", "<bos>", "<eos>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(text + UNICODE_TEXT, trainer)
    vocab = Vocab.from_tokenizer(tok)
    assert vocab.kind == "bytes"
    return vocab


@pytest.fixture(params=["dense", "sparse"])
def tables(request, monkeypatch) -> str:
    """Both layouts of the processors' own tables and of the automata's masks: dense
    (Q + 1, V) rows where the automaton is small and dense packed masks (the defaults for
    these), or none and only the nonzero words of each packed mask where that is smaller
    (as for large automata: the automaton's packed masks and its stepper)."""
    if request.param == "sparse":
        monkeypatch.setattr(mask_module, "DENSE_LIMIT", 0)
        monkeypatch.setattr(automaton_module, "DENSE_MASK_BYTES", 0)
    return request.param


def automata(name: str, bpe: Vocab):
    """(automaton, eos id) for each test grammar."""
    if name == "bpe:unicode":
        return compile_regex(UNICODE_PATTERN, bpe), bpe.id("<eos>")
    if name == "bpe:dates":
        return neurosym.load(shipped_file("grammars/dates.regex"), vocab=bpe)["STAMP"], bpe.id("<eos>")
    if name == "bpe:email":
        return neurosym.load(shipped_file("grammars/email.regex"), vocab=bpe)["EMAIL"], bpe.id("<eos>")
    if name == "bpe:words":  # a word list whose masks the automaton stores sparsely (nonzero words only)
        words = [line.strip() for line in shipped_file("grammars/months.txt").read_text(encoding="utf-8").splitlines() if line.strip() and not line.startswith("#")]
        auto = compile_regex("(" + "|".join(words) + ")( (" + "|".join(words) + "))*", bpe)
        return auto, bpe.id("<eos>")
    if name == "chars:numbers":
        return neurosym.load(shipped_file("grammars/numbers.regex"), vocab=CHARS)["SCIENTIFIC"], CHARS.id("<eos>")
    wa = load_fsg(shipped_file("grammars/clause.fsg"))  # words: the FSG's own vocabulary
    return wa, wa.vocab.id("<eos>")


GRAMMARS = ["bpe:unicode", "bpe:dates", "bpe:email", "bpe:words", "chars:numbers", "words:clause"]


def lockstep(numpy_proc, torch_proc, eos: int, batch: int, steps: int, seed: int, dtype: torch.dtype = torch.float32) -> dict:
    """Drive the two processors along the same random walk and assert they agree at every
    step; returns what the walk did (to check that it did something)."""
    numpy_proc.reset(batch)
    torch_proc.reset(batch)
    assert numpy_proc.tracker.uses_numpy and not torch_proc.tracker.uses_numpy
    V = numpy_proc.tracker.automaton.vocab.__len__()
    gen = torch.Generator().manual_seed(seed)
    done = torch.zeros(batch, dtype=torch.bool)
    seen = {"ended": 0, "rejected": 0, "states": set()}
    is_mask = isinstance(numpy_proc, GrammarMask)
    for _ in range(steps):
        for a, b in ((numpy_proc.tracker.states, torch_proc.tracker.states), (numpy_proc.tracker.steps, torch_proc.tracker.steps)):
            assert a.dtype == b.dtype == torch.long and torch.equal(a, b)
        assert torch.equal(numpy_proc.tracker.final(), torch_proc.tracker.final())
        seen["states"].update(numpy_proc.tracker.states.tolist())
        scores = torch.randn(batch, V, generator=gen).to(dtype)
        out_np, out_t = numpy_proc(scores.clone()), torch_proc(scores.clone())
        assert out_np.dtype == out_t.dtype == dtype
        assert torch.equal(out_np, out_t)
        probe = torch.randint(0, V, (batch,), generator=gen)
        probe[::3] = eos
        assert torch.equal(numpy_proc.allowed(probe), torch_proc.allowed(probe))
        if is_mask:
            assert torch.equal(numpy_proc.allowed_matrix(), torch_proc.allowed_matrix())
            assert torch.equal(out_np > float("-inf"), numpy_proc.allowed_matrix())
            for row in range(batch):
                assert numpy_proc.describe_allowed(row) == torch_proc.describe_allowed(row)
        else:
            assert torch.equal(numpy_proc.log_prior(), torch_proc.log_prior())
            assert torch.equal(numpy_proc.log_prob(probe), torch_proc.log_prob(probe))
        # the walk: the best allowed token (end included), now and then a random one that may be rejected
        tokens = out_np.float().argmax(dim=1)
        stray = torch.rand(batch, generator=gen) < 0.05
        tokens = torch.where(stray & ~done, torch.randint(0, V, (batch,), generator=gen), tokens)
        tokens = torch.where(done, 0, tokens)  # padding after the end
        seen["rejected"] += int((numpy_proc.tracker.step(tokens) < 0).sum())
        if done.any():
            numpy_proc.advance(tokens, done)
            torch_proc.advance(tokens, done)
        else:
            numpy_proc.advance(tokens)
            torch_proc.advance(tokens)
        ended = (tokens == eos) & ~done
        seen["ended"] += int(ended.sum())
        done |= ended
    return seen


@pytest.mark.parametrize("grammar", GRAMMARS)
@pytest.mark.parametrize("batch", [1, 7])
@pytest.mark.parametrize("max_len", [None, 12])
def test_grammar_mask_numpy_and_torch_agree_along_random_walks(grammar, batch, max_len, tables, bpe):
    auto, eos = automata(grammar, bpe)
    if grammar == "bpe:words":
        assert (auto.mask_dense is None) == (tables == "sparse")  # the sparse bias path is taken
    walks = [lockstep(GrammarMask(auto, eos, max_len=max_len, backend="numpy"), GrammarMask(auto, eos, max_len=max_len, backend="torch"),
                      eos, batch, steps=16, seed=seed) for seed in range(3)]
    assert len(set().union(*(w["states"] for w in walks))) > 2  # the walks moved
    assert sum(w["ended"] for w in walks) + sum(w["rejected"] for w in walks) > 0


@pytest.mark.parametrize("batch", [1, 7])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
def test_fsg_prior_numpy_and_torch_agree_along_random_walks(batch, dtype, tables, bpe):
    wa, eos = automata("words:clause", bpe)
    for weight in (1.0, 0.5, 0.0):
        walk = lockstep(FSGPrior(wa, weight, eos, backend="numpy"), FSGPrior(wa, weight, eos, backend="torch"), eos, batch, 16, seed=7, dtype=dtype)
        assert len(walk["states"]) > 2


def test_the_byte_level_walks_cross_characters(bpe):
    # the BPE has tokens that end inside a character, and the unicode pattern's walk takes some
    auto, eos = automata("bpe:unicode", bpe)
    partial = [t for t, s in enumerate(bpe.surfaces) if s is not None and not utf8_complete(bytes(s))]
    assert partial
    mask = GrammarMask(auto, eos)
    mask.reset(len(partial))
    assert mask.tracker.uses_numpy
    assert bool(mask.allowed(torch.tensor(partial)).any())


def utf8_complete(b: bytes) -> bool:
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


@pytest.mark.parametrize("grammar", ["words:clause", "bpe:unicode", "bpe:email"])
def test_generations_are_the_same_under_both_backends(grammar, bpe):
    auto, eos = automata(grammar, bpe)
    vocab = auto.vocab
    bos = vocab.id("<bos>")
    outs = []
    for backend in ("numpy", "torch"):
        torch.manual_seed(0)
        model = CausalLM(LMConfig(vocab_size=len(vocab), d_model=16, n_layers=1, n_heads=2, d_ff=32, max_len=25)).eval()
        procs = [GrammarMask(auto, eos, max_len=24, backend=backend)]
        if grammar == "words:clause":
            procs.insert(0, FSGPrior(auto, 0.7, eos, backend=backend))
        outs.append(generate(model, n=40, max_len=24, processors=procs, eos_id=eos, bos_id=bos, seed=3))
    a, b = outs
    assert a.tokens == b.tokens and a.status == b.status
    assert a.status == ["eos"] * 40
    assert all(auto.accepts(t) for t in a.tokens)


def test_auto_picks_numpy_on_the_cpu_and_states_read_as_tensors():
    auto = compile_regex(r"a(bc)?", Vocab.words(["a", "b", "c", "bc"]))
    tracker = StateTracker(auto)
    tracker.reset(3)
    assert tracker.uses_numpy and isinstance(tracker.states_np, np.ndarray)
    tracker.advance(torch.tensor([0, 1, 0]))
    assert tracker.states.tolist() == [auto.next_state(0, 0), -1, auto.next_state(0, 0)]
    assert tracker.steps.tolist() == [1, 1, 1]
    tracker.states = torch.tensor([0, 0])  # a batch set from outside (tests, replays) keeps working
    assert tracker.states_np.tolist() == [0, 0]
    with pytest.raises(NeurosymError, match="backend must be one of"):
        GrammarMask(auto, 1, backend="jax")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("grammar", ["bpe:email", "words:clause"])
def test_cuda_rows_keep_tensors_and_agree_with_numpy(grammar, bpe):
    auto, eos = automata(grammar, bpe)
    cpu, gpu = GrammarMask(auto, eos), GrammarMask(auto, eos)
    cpu.reset(5)
    gpu.reset(5, "cuda")
    assert cpu.tracker.uses_numpy and not gpu.tracker.uses_numpy and gpu.tracker.states.device.type == "cuda"
    gen = torch.Generator().manual_seed(0)
    for _ in range(12):
        scores = torch.randn(5, len(auto.vocab), generator=gen)
        a, b = cpu(scores.clone()), gpu(scores.clone().cuda())
        assert torch.equal(a, b.cpu())
        tokens = a.argmax(dim=1)
        cpu.advance(tokens)
        gpu.advance(tokens.cuda())
        assert torch.equal(cpu.tracker.states, gpu.tracker.states.cpu())
