"""JSON Schemas of MaskBench (issue 42), when the shared sample is beside the checkout:
documents sampled from the schemas' grammars are instances (the jsonschema package
judges), and the bench's protocol runs end to end on a few schemas. The schemas are
benchmark input only; nothing of them is copied into the repository."""

from __future__ import annotations

import json

import pytest

from neurosym.bench.maskbench import default_folder, read_cases
from neurosym.compile.json_schema import SchemaError, schema_grammar
from neurosym.compile.pcfg_sample import sample_sentences

jsonschema = pytest.importorskip("jsonschema")
FOLDER = default_folder()
needs_maskbench = pytest.mark.skipif(FOLDER is None, reason="needs ../shared/data/maskbench (the MaskBench sample)")


def validator(schema):
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


@needs_maskbench
@pytest.mark.slow
def test_documents_sampled_from_100_schemas_are_instances():
    """1,000 documents: 10 from each of the first 100 schemas (by name) that compile and
    whose schema the jsonschema package itself can check; every one validates."""
    checked = 0
    for name, schema, _ in read_cases(FOLDER):
        try:
            g = schema_grammar(schema)
            v = validator(schema)
            v.is_valid(None)
        except (SchemaError, jsonschema.exceptions.SchemaError, jsonschema.exceptions.RefResolutionError):
            continue
        except Exception:  # noqa: BLE001 - a schema jsonschema cannot read (remote refs): no judge for it
            continue
        docs = ["".join(s) for s in sample_sentences(g, 10, seed=0, max_len=400)]
        assert len(docs) == 10, name
        for d in docs:
            errors = [e.message for e in v.iter_errors(json.loads(d))]
            assert not errors, (name, d[:300], errors[:2])
        checked += 1
        if checked == 100:
            break
    assert checked == 100


@needs_maskbench
def test_the_bench_protocol_on_a_few_schemas():
    from neurosym.bench import maskbench

    r = maskbench.run(engines=("neurosym",), limit=5)
    e = r["engines"]["neurosym"]
    c = e["counts"]
    assert c["schemas"] == 5 and c.get("invalidation_errors", 0) == 0
    assert e["time_between_masks_us"]["n"] > 0 and e["time_to_first_mask_us"]["n"] == 5 - c.get("compile_errors", 0)
    assert "neurosym" in maskbench.format_results(r)
