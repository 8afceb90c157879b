# afinn.lex — the AFINN-165 word list as fuzzy features (docs/lexicon.md).
# AFINN-en-165.txt is read as it is: each line sets polarity = score / 5 (in -1..1)
# and valence_raw = the integer score (in -5..5). Multi-word entries such as
# "can't stand" are single lexicon words (a vocabulary token must spell them whole).
%include "AFINN-en-165.txt" format=afinn

%feature polarity range=-1..1
%feature valence_raw range=-5..5

# output columns: positive and negative strength as low / med / high terms
%feature pos = value(polarity, part=pos) terms=low,med,high kernel=triangular centers=0.2,0.6,1.0
%feature neg = value(polarity, part=neg) terms=low,med,high kernel=triangular centers=0.2,0.6,1.0
