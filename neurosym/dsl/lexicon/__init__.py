"""Parser for `.lex` fuzzy feature lexicons (and raw VADER / AFINN files) -> a :class:`Lexicon`.

A `.lex` file declares lexical features (``%feature polarity range=-1..1``), computed
features with a small rule language (``%feature is_noun = class(SUBJ, OBJ)``), word
classes, VADER-style modifiers, includes, and body lines ``word feature=value ...``.
``%format vader|afinn`` makes the rest of a file raw lexicon lines; ``%include "f"
format=vader`` pulls in such a file. The format is documented in docs/lexicon.md.

Parsing is lark LALR (``lexicon.lark``); a semantic pass then reports, at
file:line:col, unknown features, classes, terms, roles-free misuse of values as
conditions, values out of a declared range, duplicate declarations, bad kernel specs
and bad options. The package holds one piece per module: :mod:`.rules` (the rule
language), :mod:`.model` (the parsed lexicon), :mod:`.reader` (files and includes),
:mod:`.raw` (VADER / AFINN lines) and :mod:`.builder` (the semantic pass).
"""

from neurosym.dsl.lexicon.model import Entry, Feature, Lexicon, Modifier, Terms, WordClass, did_you_mean, format_lexicon_summary
from neurosym.dsl.lexicon.reader import LexiconReader, parse_lexicon, read_lexicon
from neurosym.dsl.lexicon.rules import (
    AndCond,
    BosCond,
    CapitalizedCond,
    ClassCond,
    Cond,
    FeatureRule,
    HasCond,
    Name,
    NotCond,
    OrCond,
    PrevCond,
    RoleCond,
    SeenCond,
    TermOf,
    TokenCond,
    Value,
    ValueOf,
    rule_text,
    walk_rule,
)

__all__ = [
    "AndCond", "BosCond", "CapitalizedCond", "ClassCond", "Cond", "Entry", "Feature", "FeatureRule", "HasCond",
    "Lexicon", "LexiconReader", "Modifier", "Name", "NotCond", "OrCond", "PrevCond", "RoleCond", "SeenCond", "TermOf",
    "Terms", "TokenCond", "Value", "ValueOf", "WordClass", "did_you_mean", "format_lexicon_summary", "parse_lexicon",
    "read_lexicon", "rule_text", "walk_rule",
]
