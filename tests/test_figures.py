"""Every figure of README.md and docs/*.md that names its JSON report matches it
(neurosym.experiments.figures), and a stale figure fails: shown on edited copies."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from neurosym.experiments import figures

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# the pages whose run figures are checked, and at least how many markers each holds
CHECKED = {"README.md": 3, "semantic_fusion.md": 10, "semantic_kl.md": 20, "structured_suite.md": 20, "idea_gating.md": 14, "decode.md": 80,
           "synth.md": 30, "automata.md": 6, "pcfg.md": 3, "strings.md": 11, "encoders.md": 2,
           "json_schema.md": 3}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_figure_matches_its_json(page):
    assert [str(m) for m in figures.check_page(page)] == []


def test_the_published_pages_carry_their_markers():
    for name, least in CHECKED.items():
        page = ROOT / name if name == "README.md" else ROOT / "docs" / name
        assert figures.count_markers(page.read_text(encoding="utf-8")) >= least, name


def test_every_committed_report_backs_a_page():
    """No orphan JSON in docs/: each report is read by some page's markers."""
    named = {m["file"] for page in PAGES for pattern in (figures.SENTENCE, figures.BEGIN)
             for m in pattern.finditer(page.read_text(encoding="utf-8"))}
    assert {f"docs/{f.name}" for f in (ROOT / "docs").glob("*.json")} <= named


def copy_tree(tmp_path: Path, *names: str) -> Path:
    """README.md or docs pages plus every docs/*.json, copied into a scratch repository root."""
    (tmp_path / "docs").mkdir()
    for f in (ROOT / "docs").glob("*.json"):
        shutil.copy(f, tmp_path / "docs" / f.name)
    for name in names:
        shutil.copy(ROOT / name, tmp_path / name)
    return tmp_path


def test_a_stale_figure_in_a_sentence_fails(tmp_path):
    root = copy_tree(tmp_path, "README.md")
    page = root / "README.md"
    assert figures.check_page(page) == []
    text = page.read_text(encoding="utf-8")
    assert "fusion 5.39 ± 0.07\nagainst" in text
    page.write_text(text.replace("fusion 5.39 ± 0.07\nagainst", "fusion 5.42 ± 0.14\nagainst"), encoding="utf-8")
    bad = figures.check_page(page)
    assert len(bad) == 2 and all(m.page == page for m in bad)
    assert "5.42 is written but docs/semantic_fusion_report_main_3seeds.json gives fusion/test_ppl = 5.3876" in str(bad[0])
    assert str(bad[0]).startswith(f"{page}:{text[: text.index('5.39 ± 0.07')].count(chr(10)) + 2}:")  # the marker's line


def test_a_changed_report_fails_the_page_that_quotes_it(tmp_path):
    root = copy_tree(tmp_path, "README.md")
    report = root / "docs" / "semantic_fusion_report_main_3seeds.json"
    data = json.loads(report.read_text())
    data["headline"]["recipe"]["p"] = 0.007  # the old 5-seed p-value
    report.write_text(json.dumps(data))
    assert any("0.079 is written but" in str(m) and "headline/recipe/p = 0.007" in str(m) for m in figures.check_page(root / "README.md"))


def test_a_stale_generated_table_fails_and_write_regenerates_it(tmp_path):
    root = copy_tree(tmp_path, "docs/semantic_fusion.md")
    page = root / "docs" / "semantic_fusion.md"
    good = page.read_text(encoding="utf-8")
    row = "| fusion-fair | 3.8013 ± 0.0024 |"
    assert good.count(row) == 1
    page.write_text(good.replace(row, "| fusion-fair | 3.9013 ± 0.0024 |"), encoding="utf-8")
    bad = figures.check_page(page)
    assert len(bad) == 1 and "semantic_fusion.format_report differs here" in str(bad[0]) and row in str(bad[0])
    assert bad[0].line == good[: good.index(row)].count("\n") + 1  # the line of the stale row
    assert figures.main([str(page)]) == 1
    assert figures.check_page(page, write=True) == [] and page.read_text(encoding="utf-8") == good
    assert figures.main([str(page)]) == 0


def test_numbers_and_paths():
    assert figures.numbers_in("fusion 5.42 ± 0.14, p = 0.007 with `--seeds 5` on kl-T0.1; 577,047 and -1.6 [x](docs/a2.md)") == [
        "5.42", "0.14", "0.007", "577,047", "-1.6"]
    assert figures.written_matches("5.42", 5.4172) and not figures.written_matches("5.42", 5.4251)
    assert figures.written_matches("577,047", 577047) and not figures.written_matches("577,047", 577048)
    assert figures.written_matches("3e-9", 3.23e-9) and not figures.written_matches("3e-9", 3.6e-9)
    assert figures.written_matches("18.6", 30 / 161 * 100) and not figures.written_matches("18.6", float("nan"))
    report = {"a": {"kl-T0.1": {"runs": [{"ppl": 2.5}]}}, "share": 0.186, "flag": True}
    assert figures.lookup(report, "a/kl-T0.1/runs/0/ppl") == 2.5 and figures.lookup(report, "share*100") == pytest.approx(18.6)
    for bad in ("a/missing", "a/kl-T0.1/runs/3/ppl", "flag"):
        with pytest.raises(KeyError):
            figures.lookup(report, bad)


def test_a_marker_with_the_wrong_count_or_path_is_reported(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "r.json").write_text(json.dumps({"x": 1.25, "y": 3}))
    page = tmp_path / "docs" / "p.md"
    page.write_text("Intro 7 words.\n\nx is 1.25 and y is 3 <!-- figures docs/r.json: x y -->.\n\n"
                    "only 1.25 <!-- figures docs/r.json: x y -->\n\n* item 1.4 <!-- figures docs/r.json: x -->\n"
                    "* 4 <!-- figures docs/r.json: z -->\n\n<!-- figures-begin docs/r.json nosuch -->\n<!-- figures-end -->\n")
    got = [str(m).split(": ", 1)[1] for m in figures.check_page(page)]
    assert got == ["unknown renderer 'nosuch'; expected one of " + ", ".join(figures.RENDERERS),
                   "1 numbers written (1.25) but 2 paths named",
                   "1.4 is written but docs/r.json gives x = 1.25",
                   "docs/r.json: no 'z' in the report (stopped at 'z')"]


def test_a_quoted_path_reaches_a_key_with_spaces(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "r.json").write_text(json.dumps({"patterns": {"5000 words": {"1": {"us": [51.6, 90.0]}}, "5000": {"us": 2.0}}}))
    assert figures.marker_paths("a/'5000 words'/b  \"x y\"/z - c*100") == ["a/5000 words/b", "x y/z", "-", "c*100"]
    page = tmp_path / "docs" / "p.md"
    page.write_text("| 5,000 words | 51.6 <!-- figures docs/r.json: - patterns/'5000 words'/1/us/0 --> |\n"
                    "| 5,000 words | 52.6 <!-- figures docs/r.json: - patterns/'5000 words'/1/us/0 --> |\n"
                    "| 5,000 words | 51.6 <!-- figures docs/r.json: - patterns/5000 words/1/us/0 --> |\n"
                    "| 5,000 words | 51.6 <!-- figures docs/r.json: - patterns/'5000 words/1/us/0 --> |\n")
    got = [str(m).split(": ", 1)[1] for m in figures.check_page(page)]
    assert got == ["52.6 is written but docs/r.json gives patterns/5000 words/1/us/0 = 51.6",  # the quoted key is read
                   "2 numbers written (5,000, 51.6) but 3 paths named",  # unquoted, the key splits in two
                   "cannot read the paths of the marker: No closing quotation"]
