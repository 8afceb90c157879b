"""``neurosym bench compile``: word lists as tries vs interegular alternations, and the
token index of regexes over a large byte-level BPE vocabulary.

Data: the most frequent alphabetic words of WikiText-2 ``valid.txt`` (shared data), and
a byte-level BPE trained on WikiText-2 valid+test and UD English-EWT text (cached in the
neurosym cache folder).
"""

from __future__ import annotations

import hashlib
import multiprocessing as mp
import re
import sys
import time
from collections import Counter
from pathlib import Path

from neurosym.data import shared_data
from neurosym.errors import NeurosymError
from neurosym.compile.regex import Limits, words_dfa
from neurosym.compile.artifact import atomic_write_bytes, default_cache_dir
from neurosym.compile.regex import pattern_dfa, to_automaton
from neurosym.vocab import Vocab

TOKEN_REGEXES = {
    "capitalised": r"[A-Z][a-z]+",
    "year": r"(1[0-9]|20)[0-9]{2}",
    "email": r"[\w.+-]+@[\w-]+(\.[\w-]+)+",
}


def frequent_words(n: int) -> list[str]:
    """The ``n`` most frequent alphabetic words of WikiText-2 valid (ties by first appearance)."""
    text = shared_data("wikitext-2", "valid.txt").read_text(encoding="utf-8")
    counts = Counter(w for w in text.split() if w.isalpha())
    words = [w for w, _ in counts.most_common(n)]
    if len(words) < n:
        raise ValueError(f"WikiText-2 valid has only {len(words)} distinct alphabetic words")
    return words


def _interegular_alternation(words: list[str], out) -> None:
    import interegular

    t0, c0 = time.perf_counter(), time.process_time()
    fsm = interegular.parse_pattern("|".join(re.escape(w) for w in words)).to_fsm()
    out.put((time.perf_counter() - t0, time.process_time() - c0, len(fsm.states)))


def bench_words(n_words: int, reference_timeout: float) -> dict:
    """Seconds to compile ``n_words`` words as our trie vs interegular's alternation, in
    wall time and in CPU time (the reference runs in a child process: its own CPU time;
    the CPU figures are the fair ones on a loaded machine)."""
    words = frequent_words(n_words)
    t0, c0 = time.perf_counter(), time.process_time()
    dfa = words_dfa(words, limits=Limits(max_states=10 * n_words + 1000))
    ours, ours_cpu = time.perf_counter() - t0, time.process_time() - c0
    assert all(dfa.accepts(w) for w in words)
    queue: mp.Queue = mp.get_context("fork").Queue()
    proc = mp.get_context("fork").Process(target=_interegular_alternation, args=(words, queue))
    proc.start()
    proc.join(reference_timeout)
    if proc.is_alive():
        proc.terminate()
        proc.join()
        ref_s, ref_cpu, ref_states = None, None, None
    else:
        ref_s, ref_cpu, ref_states = queue.get()
    return {
        "words": n_words,
        "trie_seconds": ours,
        "trie_cpu_seconds": ours_cpu,
        "trie_states": dfa.num_states,
        "interegular_seconds": ref_s,
        "interegular_cpu_seconds": ref_cpu,
        "interegular_states": ref_states,
        "interegular_timeout": reference_timeout if ref_s is None else None,
        "speedup": (ref_s / ours) if ref_s is not None else None,
        "speedup_cpu": (ref_cpu / ours_cpu) if ref_cpu is not None and ours_cpu > 0 else None,
    }


def bpe_corpus() -> list[Path]:
    """The text the benchmark BPE is trained on: WikiText-2 valid and test, and the
    sentences of UD English-EWT (train/dev/test), all from the shared data folder."""
    ud = [shared_data("ud-english-ewt", f"en_ewt-ud-{split}.conllu") for split in ("train", "dev", "test")]
    return [shared_data("wikitext-2", "valid.txt"), shared_data("wikitext-2", "test.txt"), *ud]


def _corpus_lines(files: list[Path]):
    for f in files:
        for line in f.read_text(encoding="utf-8").splitlines():
            if f.suffix == ".conllu":
                if line.startswith("# text = "):
                    yield line[len("# text = ") :]
            elif line.strip():
                yield line


def bpe_tokenizer(vocab_size: int):
    """A byte-level BPE trained on :func:`bpe_corpus`, cached by size and data hash."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers


    files = bpe_corpus()
    digest = hashlib.sha256(b"".join(hashlib.sha256(f.read_bytes()).digest() for f in files)).hexdigest()[:16]
    cached = Path(default_cache_dir()) / f"bpe-bench-{vocab_size}-{digest}.json"
    if cached.is_file():
        return Tokenizer.from_file(str(cached))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    tok.train_from_iterator(_corpus_lines(files), trainer)
    atomic_write_bytes(cached, tok.to_str().encode())
    return tok


def bench_token_index(bpe_size: int) -> dict:
    """Seconds and memory to index three regexes over a byte-level BPE vocabulary: the
    allowed (state, token) arcs, the automaton's own index (``index_bytes``) and what
    dense masks would take as bools and as bitsets."""
    t0 = time.perf_counter()
    vocab = Vocab.from_tokenizer(bpe_tokenizer(bpe_size))
    setup = time.perf_counter() - t0
    rows = []
    for name, pattern in TOKEN_REGEXES.items():
        t0 = time.perf_counter()
        dfa = pattern_dfa(pattern)
        t1 = time.perf_counter()
        auto = to_automaton(dfa, vocab, name=name)
        t2 = time.perf_counter()
        held = auto.index_bytes()  # before `delta` is built on first use below
        Q, V = auto.delta.shape
        rows.append(
            {
                "name": name,
                "pattern": pattern,
                "char_states": dfa.num_states,
                "token_states": Q,
                "compile_seconds": t1 - t0,
                "index_seconds": t2 - t1,
                "allowed_arcs": int((auto.delta >= 0).sum()),
                "index_bytes": held,  # what the compiled automaton keeps: packed masks and the walker's tables, no arcs
                "mask_bool_bytes": Q * V,
                "mask_bitset_bytes": Q * ((V + 7) // 8),
            }
        )
    return {"vocab_size": len(vocab), "tokenizer_seconds": setup, "regexes": rows}


def run(n_words: int = 5000, bpe_size: int = 32000, reference_timeout: float = 900.0, progress: bool = True) -> dict:
    """Both benchmarks; a NeurosymError before any work when the shared data is missing."""
    try:
        bpe_corpus()  # every file both parts read (WikiText-2 valid is among them)
    except NeurosymError as err:
        raise NeurosymError(
            f"neurosym bench compile needs the shared data sets wikitext-2 and ud-english-ewt "
            f"(../shared/data beside the checkout, or $NEUROSYM_SHARED_DATA): {err}"
        ) from None
    say = (lambda m: print(m, file=sys.stderr, flush=True)) if progress else (lambda m: None)
    say(f"[1/2] {n_words} words: trie vs interegular alternation (reference timeout {reference_timeout:g} s)...")
    words = bench_words(n_words, reference_timeout)
    say(f"[2/2] token index over a {bpe_size} byte-level BPE vocabulary...")
    tokens = bench_token_index(bpe_size)
    return {"word_list": words, "token_index": tokens}


def format_results(r: dict) -> str:
    w = r["word_list"]
    ref = (f"{w['interegular_seconds']:.2f} s ({w['interegular_states']} states), {w['interegular_cpu_seconds']:.2f} CPU s" if w["interegular_seconds"] is not None
           else f"> {w['interegular_timeout']:g} s (timed out)")
    ratio = f"{w['speedup']:.0f}x" if w["speedup"] is not None else f"> {w['interegular_timeout'] / w['trie_seconds']:.0f}x"
    lines = [
        f"word list ({w['words']} words, WikiText-2 valid)",
        f"  neurosym trie          {w['trie_seconds']:.3f} s ({w['trie_states']} states, minimal)"
        + (f", {w['trie_cpu_seconds']:.3f} CPU s" if "trie_cpu_seconds" in w else ""),
        f"  interegular alternation {ref}",
        f"  ratio                  {ratio} faster",
        "",
        f"token index over a {r['token_index']['vocab_size']}-token byte-level BPE (WikiText-2 + UD EWT; loaded/trained in {r['token_index']['tokenizer_seconds']:.1f} s)",
        f"  {'name':<12}{'char Q':>7}{'token Q':>8}{'compile s':>11}{'index s':>9}{'arcs':>10}{'index':>10}{'mask bool':>11}{'mask bits':>11}",
    ]
    for x in r["token_index"]["regexes"]:
        lines.append(
            f"  {x['name']:<12}{x['char_states']:>7}{x['token_states']:>8}{x['compile_seconds']:>11.3f}{x['index_seconds']:>9.3f}"
            f"{x['allowed_arcs']:>10}{x['index_bytes'] / 1024:>8.0f}KB"
            f"{x['mask_bool_bytes'] / 1024:>9.0f}KB{x['mask_bitset_bytes'] / 1024:>9.1f}KB"
        )
    return "\n".join(lines)
