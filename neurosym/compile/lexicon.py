"""Lexicon -> FeatureBank: per-token fuzzy features, computed causally.

A :class:`FeatureBank` is compiled from a parsed :class:`~neurosym.dsl.lexicon.Lexicon`
against a :class:`~neurosym.vocab.Vocab`. It holds per-token tables (lexical values,
class membership, capitalisation, modifiers), the lexicon's rules, and

* ``names``: the F output columns (``pos_low``, ``pos_med``, ... for a feature with terms);
* ``table``: (V, F) static memberships — each token on its own, without context;
* ``featurize(ids (B, L), roles) -> (B, L, F)``: causal; the features at position t read
  tokens 0..t only (shifts and cumulative sums, no Python loops over tokens).

Tokens match lexicon words by their text: the token's surface (bytes decoded as UTF-8),
exactly, else with surrounding whitespace stripped (so ``Ġgood`` / ``▁good`` match
``good``), else — with ``ignore_case=True`` — case-insensitively.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import torch
from torch import Tensor, nn

from neurosym.dsl.lexicon import (
    AndCond,
    BosCond,
    CapitalizedCond,
    ClassCond,
    Feature,
    HasCond,
    Lexicon,
    NotCond,
    OrCond,
    PrevCond,
    RoleCond,
    SeenCond,
    TermOf,
    TokenCond,
    ValueOf,
    read_lexicon,
    walk_rule,
)
from neurosym.errors import NeurosymError
from neurosym.fuzzy import membership
from neurosym.vocab import Vocab


# ---------------------------------------------------------------------- tensor helpers
def shift(x: Tensor, k: int, fill=0) -> Tensor:
    """``x`` moved ``k`` positions later along the last axis: ``out[..., t] = x[..., t - k]``,
    ``fill`` where ``t < k``."""
    if k == 0:
        return x
    L = x.shape[-1]
    if k >= L:
        return torch.full_like(x, fill)
    pad = torch.full_like(x[..., :k], fill)
    return torch.cat([pad, x[..., : L - k]], dim=-1)


class _Context:
    """What one featurize call knows: ids (B, L), roles, segments (split at ``<bos>``)."""

    def __init__(self, bank: "FeatureBank", ids: Tensor, roles: Mapping[str, Tensor] | None, static: bool):
        self.bank = bank
        self.ids = ids
        self.roles = roles
        self.static = static
        specials = [i for i in (bank.pad_id, bank.bos_id) if i is not None]
        self.boundary = ids == bank.bos_id if bank.bos_id is not None else torch.zeros_like(ids, dtype=torch.bool)
        self.real = ~torch.isin(ids, torch.tensor(specials, device=ids.device)) if specials else torch.ones_like(ids, dtype=torch.bool)
        L = ids.shape[-1]
        pos = torch.arange(L, device=ids.device).expand_as(ids)
        self.last_boundary = torch.where(self.boundary, pos, torch.full_like(pos, -1)).cummax(-1).values
        self.lexical_cache: dict[str, tuple[Tensor, Tensor]] = {}

    def count_before(self, c: Tensor) -> Tensor:
        """(B, L) long: how often ``c`` held strictly before t, since the last ``<bos>``."""
        ci = c.long()
        cum = ci.cumsum(-1)
        at_b = cum.gather(-1, self.last_boundary.clamp(min=0))
        base = torch.where(self.last_boundary >= 0, at_b, torch.zeros_like(at_b))
        return (cum - ci - base).clamp(min=0)


class FeatureBank(nn.Module):
    """Fuzzy features of tokens: ``names`` (F), ``table`` (V, F), ``featurize(ids, roles)``.

    Build it with :func:`compile_lexicon` or :func:`load_lexicon`. Roles (``role(subject)``
    in a rule) come from the caller: ``roles={"subject": (B, L) bool, ...}``, e.g. from
    running the FSG that generated the text; ``bank.roles`` lists the ones it needs.
    """

    def __init__(self, lexicon: Lexicon, vocab: Vocab, ignore_case: bool = False, bos: str = "<bos>", pad: str = "<pad>"):
        super().__init__()
        self.lexicon = lexicon
        self.vocab = vocab
        self.ignore_case, self.bos, self.pad = ignore_case, bos, pad  # kept for saving (neurosym.compile.artifact)
        self.features: list[Feature] = list(lexicon.outputs)
        self.names: list[str] = [c for f in self.features for c in f.columns]
        self.bos_id = vocab.tokens.index(bos) if bos in vocab.tokens else None
        self.pad_id = vocab.tokens.index(pad) if pad in vocab.tokens else None
        texts = _token_texts(vocab)
        words = _match_words(texts, lexicon, ignore_case)
        V = len(vocab)

        self._lex_index = {f.name: i for i, f in enumerate(lexicon.lexical)}
        values = torch.zeros(V, len(self._lex_index))
        present = torch.zeros(V, len(self._lex_index), dtype=torch.bool)
        rows, cols, xs = [], [], []  # gathered first, written with one indexed assignment
        for v, w in enumerate(words):
            for name, x in lexicon.values.get(w, {}).items() if w is not None else ():
                rows.append(v)
                cols.append(self._lex_index[name])
                xs.append(x)
        if rows:
            at = (torch.tensor(rows), torch.tensor(cols))
            values[at] = torch.tensor(xs, dtype=values.dtype)
            present[at] = True
        self.register_buffer("lex_values", values, persistent=False)
        self.register_buffer("lex_present", present, persistent=False)

        self._class_index = {name: i for i, name in enumerate(lexicon.classes)}
        member = torch.zeros(V, len(self._class_index), dtype=torch.bool)
        classes_of: dict[str, list[int]] = {}
        for name, c in lexicon.classes.items():
            for w in c.words:
                classes_of.setdefault(w, []).append(self._class_index[name])
        rows, cols = [], []
        for v, w in enumerate(words):
            for k in classes_of.get(w, ()) if w is not None else ():
                rows.append(v)
                cols.append(k)
        if rows:
            member[torch.tensor(rows), torch.tensor(cols)] = True
        self.register_buffer("class_member", member, persistent=False)
        self.register_buffer("capitalized", torch.tensor([bool(t) and t[:1].isupper() for t in (x or "" for x in texts)], dtype=torch.bool), persistent=False)

        self._token_sets: dict[tuple[str, ...], str] = {}
        for f in lexicon.computed:
            for node in walk_rule(f.rule):
                if isinstance(node, TokenCond) and node.texts not in self._token_sets:
                    name = f"token_set_{len(self._token_sets)}"
                    wanted = set(node.texts)
                    hit = torch.tensor([w in wanted for w in _match_texts(texts, wanted, ignore_case)], dtype=torch.bool)
                    self.register_buffer(name, hit, persistent=False)
                    self._token_sets[node.texts] = name

        # modifiers: per target feature, (W, V) booster amounts and negation scales by distance
        self._modifier_targets: dict[str, str] = {}
        targets = {m.target for m in lexicon.modifiers.values()}
        for target in sorted(targets):
            mods = [m for m in lexicon.modifiers.values() if m.target == target]
            W = max(m.window for m in mods)
            boost = torch.zeros(W, V)
            negate = torch.zeros(W, V)
            for v, w in enumerate(_match_texts(texts, set(lexicon.modifiers), ignore_case)):
                m = lexicon.modifiers.get(w) if w is not None else None
                if m is None or m.target != target:
                    continue
                tab = boost if m.kind == "booster" else negate
                tab[: m.window, v] = m.amount
            key = f"mod_{len(self._modifier_targets)}"
            self.register_buffer(key + "_boost", boost, persistent=False)
            self.register_buffer(key + "_negate", negate, persistent=False)
            self._modifier_targets[target] = key

        self._centers: dict[str, str] = {}
        for f in lexicon.features.values():
            if f.terms is not None:
                key = f"centers_{len(self._centers)}"
                self.register_buffer(key, torch.tensor(f.terms.centers), persistent=False)
                self._centers[f.name] = key

        self.roles: list[str] = sorted({n.role for f in lexicon.computed for n in walk_rule(f.rule) if isinstance(n, RoleCond)})
        self.register_buffer("table", self._static(self.features), persistent=False)

    # ------------------------------------------------------------------ public
    def __len__(self) -> int:
        return len(self.names)

    def __repr__(self) -> str:
        return f"FeatureBank(features={len(self.names)}, vocab={len(self.vocab)}, roles={self.roles})"

    def column(self, name: str) -> int:
        """The index of output column ``name``."""
        try:
            return self.names.index(name)
        except ValueError:
            raise NeurosymError(f"no feature column {name!r}; columns: {', '.join(self.names)}") from None

    def featurize(self, ids: Tensor, roles: Mapping[str, Tensor] | None = None) -> Tensor:
        """Features (B, L, F) of token ids (B, L) (or (L,) -> (L, F)).

        Causal: position t depends on ``ids[:, :t+1]`` and ``roles[...][:, :t+1]`` only.
        ``roles`` maps role names to (B, L) bool tensors (others are read as ``x > 0.5``);
        a rule that needs a role that is not given raises a NeurosymError naming it."""
        if ids.dim() == 1:
            return self.featurize(ids[None], None if roles is None else {k: v[None] for k, v in roles.items()})[0]
        if ids.dim() != 2:
            raise NeurosymError(f"featurize expects token ids of shape (B, L), got {tuple(ids.shape)}")
        ids = ids.long().to(self.table.device)
        roles = self._check_roles(ids, roles)
        return self._evaluate(self.features, _Context(self, ids, roles, static=False))

    forward = featurize

    def static(self, feature: str) -> Tensor:
        """(V, K) static memberships (or (V, 1) values) of any feature, output or not."""
        return self._static([self.lexicon.feature(feature)])

    def context_free_columns(self) -> list[str]:
        """The columns of ``names`` whose value at a token depends on that token alone.

        A feature is context-free when its rule reads no role (``role``), position
        (``bos``), neighbour (``prev``, ``value(.., from=prev(..))``) or history
        (``seen``), and none of the lexical values it reads is changed by a ``%modifier``.
        For those columns ``featurize`` equals the static ``table`` at every position,
        whatever the sentence (tests/lm/test_fusion.py checks it). In ``sentiment.lex``:
        the word classes, punctuation, ``pos_*``, ``neg_*``, capitalisation; not the
        roles, ``is_bos``, ``str_*`` (the preceding intensifier) or ``coref_subject``."""
        modified = {m.target for m in self.lexicon.modifiers.values()}
        out: list[str] = []
        for f in self.features:
            nodes = [] if f.rule is None else list(walk_rule(f.rule))
            reads = {f.name} if f.rule is None else {n.feature.text for n in nodes if isinstance(n, (TermOf, ValueOf))}
            contextual = any(isinstance(n, (RoleCond, BosCond, PrevCond, SeenCond)) or (isinstance(n, ValueOf) and n.from_prev) for n in nodes)
            if not contextual and not reads & modified:
                out.extend(f.columns)
        return out

    def summary(self) -> dict:
        """The lexicon's summary plus this bank's vocabulary size, columns and roles."""
        return {**self.lexicon.summary(), "vocab_size": len(self.vocab), "columns": self.names, "roles": self.roles}

    # ------------------------------------------------------------------ evaluation
    def _check_roles(self, ids: Tensor, roles: Mapping[str, Tensor] | None) -> dict[str, Tensor]:
        out: dict[str, Tensor] = {}
        missing = [name for name in self.roles if roles is None or name not in roles]
        if missing:
            needs = []
            for name in missing:
                users = [f.name for f in self.features if any(isinstance(n, RoleCond) and n.role == name for n in walk_rule(f.rule))]
                needs.append(f"feature {', '.join(users)} needs role {name!r}")
            given = ", ".join(sorted(roles)) if roles else "none"
            raise NeurosymError(
                f"{'; '.join(needs)}: pass roles={{{missing[0]!r}: (B, L) bool tensor, ...}} to featurize "
                f"(given: {given}); a compiled FSG's roles(ids) gives them"
            )
        for name in self.roles:
            r = torch.as_tensor(roles[name], device=ids.device)
            if tuple(r.shape) != tuple(ids.shape):
                raise NeurosymError(f"role {name!r} has shape {tuple(r.shape)}, expected {tuple(ids.shape)} like the token ids")
            out[name] = r if r.dtype == torch.bool else r > 0.5
        return out

    def _static(self, features: list[Feature]) -> Tensor:
        ids = torch.arange(len(self.vocab), device=self.lex_values.device)[:, None]
        return self._evaluate(features, _Context(self, ids, None, static=True))[:, 0, :]

    def _evaluate(self, features: list[Feature], ctx: _Context) -> Tensor:
        cols = [self._feature(f, ctx) for f in features]
        if not cols:
            return torch.zeros(*ctx.ids.shape, 0, device=ctx.ids.device)
        return torch.cat(cols, dim=-1)

    def _feature(self, f: Feature, ctx: _Context) -> Tensor:
        """(B, L, len(f.columns)) for one feature."""
        if f.rule is None:
            v, p = self._lexical(f.name, ctx)
        elif f.rule.graded:
            v, p = self._value(f.rule.expr, ctx)
            if f.rule.where is not None:
                p = p & self._cond(f.rule.where, ctx)
        else:
            c = self._cond(f.rule.expr, ctx)
            if f.rule.where is not None:
                c = c & self._cond(f.rule.where, ctx)
            return c.float()[..., None]
        if f.terms is None:
            return torch.where(p, v, torch.zeros_like(v))[..., None]
        m = membership(f.terms.kernel, v, getattr(self, self._centers[f.name]))
        return m * p[..., None].to(m.dtype)

    def _cond(self, node, ctx: _Context) -> Tensor:
        """(B, L) bool."""
        ids = ctx.ids
        if isinstance(node, ClassCond):
            cols = [self._class_index[c.text] for c in node.classes]
            return self.class_member[:, cols].any(-1)[ids]
        if isinstance(node, TokenCond):
            return getattr(self, self._token_sets[node.texts])[ids]
        if isinstance(node, CapitalizedCond):
            return self.capitalized[ids]
        if isinstance(node, HasCond):
            return self.lex_present[:, self._lex_index[node.feature.text]][ids]
        if isinstance(node, RoleCond):
            if ctx.static:
                return torch.zeros_like(ids, dtype=torch.bool)
            return ctx.roles[node.role]
        if isinstance(node, BosCond):
            if ctx.static:
                return torch.zeros_like(ids, dtype=torch.bool)
            return ctx.real & (ctx.count_before(ctx.real) == 0)
        if isinstance(node, PrevCond):
            return shift(self._cond(node.inner, ctx), 1, False)
        if isinstance(node, SeenCond):
            return ctx.count_before(self._cond(node.inner, ctx)) > 0
        if isinstance(node, AndCond):
            return self._cond(node.left, ctx) & self._cond(node.right, ctx)
        if isinstance(node, OrCond):
            return self._cond(node.left, ctx) | self._cond(node.right, ctx)
        if isinstance(node, NotCond):
            return ~self._cond(node.inner, ctx)
        raise AssertionError(f"not a condition: {node!r}")  # the parser type-checks rules

    def _value(self, node, ctx: _Context) -> tuple[Tensor, Tensor]:
        """(value (B, L) float, present (B, L) bool)."""
        if isinstance(node, TermOf):
            v, p = self._lexical(node.feature.text, ctx)
            f = self.lexicon.features[node.feature.text]
            k = f.terms.names.index(node.term.text)
            m = membership(f.terms.kernel, v, getattr(self, self._centers[f.name]))[..., k]
            return m, p
        assert isinstance(node, ValueOf)
        v, p = self._lexical(node.feature.text, ctx)
        if node.from_prev:
            if node.from_cond is not None:
                p = p & self._cond(node.from_cond, ctx)
            v, p = shift(v, 1, 0.0), shift(p, 1, False)
        if node.part is not None:
            p = p & ((v > 0) if node.part == "pos" else (v < 0))
            v = v.abs()
        if node.clip is not None:
            v = v.clamp(*node.clip)
        if node.default is not None:
            v = torch.where(p, v, torch.full_like(v, node.default))
            p = torch.ones_like(p)
        return v, p

    def _lexical(self, name: str, ctx: _Context) -> tuple[Tensor, Tensor]:
        """The value of lexical feature ``name`` at each token, after modifiers."""
        if name in ctx.lexical_cache:
            return ctx.lexical_cache[name]
        j = self._lex_index[name]
        v, p = self.lex_values[:, j][ctx.ids], self.lex_present[:, j][ctx.ids]
        key = self._modifier_targets.get(name)
        if key is not None and not ctx.static:
            v = self._modify(v, p, getattr(self, key + "_boost"), getattr(self, key + "_negate"), ctx)
            rng = self.lexicon.features[name].range
            if rng is not None:
                v = v.clamp(*rng)
        ctx.lexical_cache[name] = (v, p)
        return v, p

    def _modify(self, v: Tensor, p: Tensor, boost: Tensor, negate: Tensor, ctx: _Context) -> Tensor:
        """VADER-style: a modifier k <= window tokens back changes the first valued token
        after it (no valued token and no <bos> in between). Boosters add ``b * sign(v)``
        (summed), then each negation multiplies by ``-s``."""
        ids = ctx.ids
        seen_values = p.long().cumsum(-1)
        seen_bounds = ctx.boundary.long().cumsum(-1)
        total = torch.zeros_like(v)
        factor = torch.ones_like(v)
        for k in range(1, boost.shape[0] + 1):  # a loop over the (small) window, not over tokens
            b = shift(boost[k - 1][ids], k, 0.0)
            n = shift(negate[k - 1][ids], k, 0.0)
            between = shift(seen_values, 1, 0) - shift(seen_values, k, 0)
            bounds = seen_bounds - shift(seen_bounds, k, 0)
            applies = p & (between == 0) & (bounds == 0)
            total = total + torch.where(applies, b, torch.zeros_like(b))
            factor = factor * torch.where(applies & (n > 0), -n, torch.ones_like(n))
        return (v + total * torch.sign(v)) * factor


# ---------------------------------------------------------------------- token texts
def _token_texts(vocab: Vocab) -> list[str | None]:
    out: list[str | None] = []
    for s in vocab.surfaces:
        if isinstance(s, bytes):
            try:
                s = s.decode("utf-8")
            except UnicodeDecodeError:
                s = None
        out.append(s)
    return out


def _match_texts(texts: list[str | None], words, ignore_case: bool) -> list[str | None]:
    """For each token text, the word of ``words`` it stands for (exact, stripped, then
    case-folded when ``ignore_case``), or None."""
    words = set(words)
    folded: dict[str, str] = {}
    if ignore_case:
        for w in words:
            folded.setdefault(w.casefold(), w)
    out: list[str | None] = []
    for t in texts:
        if t is None:
            out.append(None)
        elif t in words:
            out.append(t)
        elif t.strip() in words:
            out.append(t.strip())
        elif ignore_case:
            out.append(folded.get(t.strip().casefold()))
        else:
            out.append(None)
    return out


def _match_words(texts: list[str | None], lexicon: Lexicon, ignore_case: bool) -> list[str | None]:
    words = set(lexicon.values)
    for c in lexicon.classes.values():
        words.update(c.words)
    return _match_texts(texts, words, ignore_case)


# ---------------------------------------------------------------------- entry points
def default_vocab(lexicon: Lexicon) -> Vocab:
    """``Vocab.words`` of every word the lexicon mentions (entries, class members,
    modifiers, ``token(...)`` literals), after the specials ``<pad> <unk> <bos> <eos>``."""
    return Vocab.words(lexicon.words())


def compile_lexicon(lexicon: Lexicon, vocab: Vocab | None = None, ignore_case: bool = False) -> FeatureBank:
    """A FeatureBank for ``lexicon`` over ``vocab`` (default: :func:`default_vocab`)."""
    return FeatureBank(lexicon, vocab if vocab is not None else default_vocab(lexicon), ignore_case=ignore_case)


def load_lexicon(path: str | Path, vocab: Vocab | None = None, limits=None, format: str | None = None, ignore_case: bool = False) -> FeatureBank:
    """Parse and compile a `.lex` file (or a raw VADER / AFINN file with ``format=``).

    ``limits`` is accepted for symmetry with ``load_regex`` and ignored: a lexicon has
    no state explosion to cap."""
    return compile_lexicon(read_lexicon(path, format=format), vocab, ignore_case=ignore_case)


def static_memberships(lexicon: Lexicon, feature: str) -> tuple[list[str], Tensor]:
    """The lexicon's words and their static memberships (N, K) in ``feature``'s columns."""
    vocab = default_vocab(lexicon)
    bank = FeatureBank(lexicon, vocab)
    table = bank.static(feature)
    keep = [i for i, s in enumerate(vocab.surfaces) if s is not None]
    return [vocab.tokens[i] for i in keep], table[keep]


def term_words(lexicon: Lexicon, feature: str, term: str, threshold: float = 0.5) -> list[str]:
    """The words whose static membership in ``feature``'s term ``term`` is >= ``threshold``
    (what an FSG's ``@feature:term`` label reads).

    Static: each word on its own, with no context (no previous token, no roles, not
    at the start of a sentence); so ``value(strength, from=prev(...), default=0.6)``
    counts as 0.6. Mind flat kernels: ``power(base=0.9, tau=0.35)`` gives every
    value in [0, 1] a membership of at least 0.74 in every term."""
    f = lexicon.feature(feature)
    where = f"{lexicon.path}: " if lexicon.path else ""
    if f.terms is None:
        raise NeurosymError(f"{where}feature {feature!r} has no fuzzy terms")
    if term not in f.terms.names:
        raise NeurosymError(f"{where}feature {feature!r} has no term {term!r}; its terms are {', '.join(f.terms.names)}")
    if not 0 < threshold <= 1:
        raise NeurosymError(f"threshold must be in (0, 1], got {threshold}")
    words, table = static_memberships(lexicon, feature)
    col = f.terms.names.index(term)
    return [w for w, m in zip(words, table[:, col].tolist()) if m >= threshold]


__all__ = ["FeatureBank", "compile_lexicon", "default_vocab", "load_lexicon", "shift", "static_memberships", "term_words"]
