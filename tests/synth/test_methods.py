"""The registry of synthesis methods (neurosym.synth.methods): the built-ins declare what
their searches accept, and the registry's errors are clear."""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest

from neurosym.errors import NeurosymError
from neurosym.synth import regex_ast as ra
from neurosym.synth import synthesize
from neurosym.synth.methods import COMMON, get_method, method_names, register_method, unregister_method


def test_the_built_in_methods_and_their_declared_options():
    assert method_names()[:3] == ("beam", "evolve", "reinforce")
    for name in ("beam", "evolve", "reinforce"):
        method = get_method(name)
        params = inspect.signature(method.resolve()).parameters
        assert list(params)[:2] == ["positives", "negatives"], name
        assert set(COMMON) <= set(params), name  # the declared common signature
        assert set(method.options) == set(params) - set(COMMON) - {"positives", "negatives"}, name
        assert method.summary


def test_reading_the_registry_loads_neither_numpy_nor_torch():
    code = (
        "import sys\n"
        "from neurosym.synth.methods import method_names, get_method\n"
        "assert method_names()[:3] == ('beam', 'evolve', 'reinforce') and get_method('beam').options\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'numpy')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[-1] == "[]"


def test_an_option_the_method_does_not_declare_is_a_clear_error():
    with pytest.raises(NeurosymError, match="synthesis method 'evolve' has no option select; its options: population"):
        synthesize(["0"], method="evolve", select="posterior")
    with pytest.raises(NeurosymError, match="unknown synthesis method 'magic'; expected one of beam, evolve, reinforce"):
        get_method("magic")


def test_registering_a_method():
    calls = []

    def search(positives, negatives=(), time_budget=10.0, seed=0, lam=0.02, progress=False, leaves=None, literal=True):
        calls.append((tuple(positives), tuple(negatives), seed, literal))
        return ra.alt(*(ra.lit(p) for p in positives)), {"literal": literal}

    method = register_method("alternation", search, summary="the positives, alternated")
    try:
        assert method.options == ("literal",)  # read from the signature
        assert "alternation" in method_names()
        with pytest.raises(NeurosymError, match="'alternation' is already registered"):
            register_method("alternation", search)
        res = synthesize(["ab", "cd"], ["a"], method="alternation", seed=3, literal=False)
        assert res.solved and res.method == "alternation" and res.info == {"literal": False}
        assert calls == [(("ab", "cd"), ("a",), 3, False)]
    finally:
        unregister_method("alternation")
    assert "alternation" not in method_names()
    with pytest.raises(NeurosymError, match="unknown synthesis method 'alternation'"):
        unregister_method("alternation")


@pytest.mark.parametrize("name", ["", "two words", "a,b"])
def test_bad_method_names(name):
    with pytest.raises(NeurosymError, match="bad synthesis method name"):
        register_method(name, lambda positives, negatives=(): None)


def test_a_search_named_by_a_string_declares_its_options():
    with pytest.raises(NeurosymError, match="must declare its options"):
        register_method("lazy-one", "somewhere:search")
    register_method("lazy-one", "neurosym.synth.nowhere:search", options=())
    try:
        with pytest.raises(NeurosymError, match=r"synthesis method 'lazy-one': cannot load 'neurosym.synth.nowhere:search'"):
            synthesize(["a"], method="lazy-one")
    finally:
        unregister_method("lazy-one")
