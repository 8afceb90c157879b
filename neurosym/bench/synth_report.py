"""The plain-text tables of ``neurosym bench synth``: :func:`format_results` for a whole run
(AlphaRegex, Regel, the everyday formats and the corpus suite), :func:`format_formats` for the
formats and :func:`format_corpus` for the corpus suite."""

from __future__ import annotations


def format_results(results: dict) -> str:
    """A plain-text table of :func:`run`'s results."""
    unit = "CPU s" if results.get("clock") == "cpu" else "s"
    lines = [
        f"regex synthesis (time budget {results.get('time_budget', '?')} {unit} per problem, seed {results.get('seed', '?')}; "
        f"{'budgets and times in process CPU seconds' if unit != 's' else 'wall-clock budgets and times'})"
    ]
    if "alpharegex" in results:
        lines.append(
            "AlphaRegex: equivalent = same language as the paper's reported regex (the intended language); held-out = "
            "no disagreement with it on any string of length <= 10 not among the examples; F1 on those strings; "
            "solved = accepts every positive and no negative"
        )
        lines.append(f"  {'method':16s} {'equivalent':>11s} {'held-out':>9s} {'mean F1':>8s} {'solved':>8s} {'median s':>9s} {'max s':>8s}")
        for m, r in results["alpharegex"].items():
            ref = r.get("with_reference")
            eq = f"{r['equivalent']:>4d}/{ref:<3d}" if ref else "       -"
            held = f"{r['heldout_equal']:>4d}/{ref:<3d}" if ref and "heldout_equal" in r else "       -"
            f1 = f"{r['mean_f1']:8.3f}" if ref else "       -"
            lines.append(
                f"  {m:16s} {eq:>11s} {held:>9s} {f1} {r['solved']:>4d}/{r['problems']:<3d} {r['median_seconds']:9.2f} {r['max_seconds']:8.2f}"
            )
    if "regel" in results:
        rg = results["regel"]
        lines.append(
            f"Regel (examples only; split {rg.get('split', 'all')}; {rg['usable']} problems without and/not, {rg['skipped']} skipped): "
            "consistent = every example right, equivalent = same DFA as the ground truth"
        )
        lines.append(f"  {'method':14s} {'consistent':>11s} {'equivalent':>11s} {'of usable':>9s} {'of all':>13s} {'mean F1':>8s} {'median s':>9s}")
        for m, r in rg.items():
            if not isinstance(r, dict):
                continue
            n_all = r.get("problems_all", r["problems"])
            lines.append(
                f"  {m:14s} {r['solved']:>5d}/{r['problems']:<5d} {r['equivalent']:>5d}/{r['problems']:<5d} "
                f"{100 * r['success_rate']:8.1f}% {r['equivalent']:>5d}/{n_all:<3d}{100 * r['equivalent'] / max(n_all, 1):4.0f}% "
                f"{r['mean_f1']:8.3f} {r['median_seconds']:9.2f}"
            )
            for suite, b in r.get("by_suite", {}).items():
                lines.append(
                    f"    {suite:12s} {b['solved']:>5d}/{b['problems']:<5d} {b['equivalent']:>5d}/{b['problems']:<5d} "
                    f"{100 * b['equivalent'] / max(b['problems'], 1):7.1f}% {b['mean_f1']:8.3f}"
                )
    if "formats" in results:
        lines.append(format_formats(results["formats"]))
    if "corpus" in results:
        lines.append(format_corpus(results["corpus"]))
    if "seconds" in results:
        lines.append(f"total {results['seconds']:.0f} s")
    return "\n".join(lines)


def format_formats(res: dict) -> str:
    """The everyday formats: the regex, seconds, fresh valid strings accepted and near misses rejected."""
    lines = ["everyday formats (format induction as a new user would try it): regex, wall s (CPU s), fresh valid accepted, near misses rejected"]
    for name, r in res.items():
        lines.append(f"  {name:12s} {r['positives']:>2d} + / {r['negatives']:>2d} -  /{r['pattern']}/  {r['wall_seconds']:.2f} ({r['cpu_seconds']:.2f}) s  "
                     f"{r['fresh_accepted']}/{r['fresh']}  {r['near_misses_rejected']}/{r['near_misses']}  (phase {r['phase']})")
    return "\n".join(lines)


def format_corpus(res: dict) -> str:
    """The corpus table: F1 (P/R) of the regexes, of memorisation and of word shapes, on all
    test tokens and on unseen forms."""
    lines = [
        f"UD English-EWT, {res['train']} ({res['train_tokens']} tokens) -> {res['test']} ({res['test_tokens']} tokens, "
        f"{res['unseen_test_tokens']} with a form unseen in {res['train']}); memorised = majority label of the training form, "
        f"unseen -> {res['majority_class']}; shape = memorised, an unseen form the majority label of its word shape; "
        f"synthesis {res['seconds']:.0f} s",
        f"  {'class':6s} {'gold':>5s} {'regex F1 (P/R)':>18s} {'memorised':>18s} {'shape':>18s} | "
        f"{'unseen':>6s} {'regex F1 (P/R)':>18s} {'memorised':>18s} {'shape':>18s}",
    ]

    def cell(x: dict) -> str:
        return f"{x['f1']:.3f} ({x['precision']:.2f}/{x['recall']:.2f})"

    for lab, row in res["classes"].items():
        a, u = row["all"], row["unseen"]
        lines.append(
            f"  {lab:6s} {a['tokens']:5d} {cell(a['regex']):>18s} {cell(a['memorised']):>18s} {cell(a['shape']):>18s} | "
            f"{u['tokens']:6d} {cell(u['regex']):>18s} {cell(u['memorised']):>18s} {cell(u['shape']):>18s}"
        )
    for lab, row in res["classes"].items():
        p = row["pattern"]
        lines.append(f"  {lab}: /{p if len(p) <= 100 else p[:97] + '...'}/")
    return "\n".join(lines)


__all__ = ["format_corpus", "format_formats", "format_results"]
