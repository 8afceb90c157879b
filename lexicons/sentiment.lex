# sentiment.lex — the semantic-fusion recipe lexicon (docs/lexicon.md).
# Sentences of the recipe corpus look like
#     Alice finishes the very good task . She reviews the extremely bad paper !
# (grammars/clause.fsg generates them)
# The FSG that generates them tags arcs with roles: subject (the subject noun or
# pronoun), object (every token of the object phrase: the, intensifier, adjective,
# noun) and head (the head noun of the object phrase, i.e. the noun the adjective
# modifies). featurize(ids, roles=...) reads those roles; the rest comes from here.

# ---- lexical features: values that body lines set
%feature polarity range=-1..1
%feature strength range=0..1

# ---- word classes
%class SUBJ    Alice Bob Carol Dave Eve
%class SUBJ_F  Alice Carol Eve
%class SUBJ_M  Bob Dave
%class VERB    finishes reviews trains starts cooks
%class OBJ     task paper model project meal
%class INTENS  slightly moderately very extremely
%class ADJ_POS good great excellent pleasant wonderful
%class ADJ_NEG bad poor terrible unpleasant awful
%class PRON    He She They It he she they it
%class PRON_F  She
%class PRON_M  He
%class DET     the
%class PUNCT   . ! , ?

# ---- the 23 output features, in column order
%feature is_noun        = class(SUBJ, OBJ)
%feature is_verb        = class(VERB)
%feature is_adj         = class(ADJ_POS, ADJ_NEG)
%feature is_subject     = role(subject)
%feature is_object      = role(object)
%feature is_head        = role(head)
%feature is_bos         = bos
%feature is_eos         = token(".", "!", "?")
%feature is_comma       = token(",")
%feature is_question    = token("?")
%feature is_exclaim     = token("!")
# positive / negative polarity of an adjective, as magnitudes in 0..1 (0 elsewhere)
%feature pos = value(polarity, part=pos)  terms=low,med,high  kernel=power(base=0.9, tau=0.35)  centers=0.2,0.6,1.0
%feature neg = value(polarity, part=neg)  terms=low,med,high  kernel=power(base=0.9, tau=0.35)  centers=0.2,0.6,1.0
# strength at an adjective: the immediately preceding intensifier's, else 0.6 (medium)
%feature str = value(strength, from=prev(class(INTENS)), default=0.6) where class(ADJ_POS, ADJ_NEG)  terms=low,med,high  kernel=power(base=0.9, tau=0.35)  centers=0.2,0.6,1.0
# a pronoun after the subject was seen earlier in the sentence refers back to it
%feature coref_subject  = class(PRON) & seen(role(subject))
%feature is_capitalized = capitalized
%feature is_pronoun     = class(PRON)

# ---- entries
slightly    strength=0.2
moderately  strength=0.5
very        strength=0.8
extremely   strength=1.0

pleasant    polarity=0.4
good        polarity=0.6
great       polarity=0.8
wonderful   polarity=0.9
excellent   polarity=1.0

unpleasant  polarity=-0.4
bad         polarity=-0.6
poor        polarity=-0.7
terrible    polarity=-0.9
awful       polarity=-1.0
