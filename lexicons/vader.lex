# vader.lex — the VADER lexicon as fuzzy features (docs/lexicon.md).
# vader_lexicon.txt is read as it is: each line sets polarity = mean / 4 (in -1..1)
# and valence_raw = the mean (in -4..4).
%include "vader_lexicon.txt" format=vader

%feature polarity range=-1..1 terms=neg,neu,pos kernel=triangular centers=-1,0,1
%feature valence_raw range=-4..4

# VADER's rules for the next sentiment word (within 3 tokens), on the -1..1 scale:
# boosters add B_INCR = 0.293 / 4 in the direction of the word's sign, negations
# multiply by N_SCALAR = -0.74. (A few of VADER's boosters and negations.)
%modifier very        booster=0.07325
%modifier extremely   booster=0.07325
%modifier really      booster=0.07325
%modifier absolutely  booster=0.07325
%modifier slightly    booster=-0.07325
%modifier barely      booster=-0.07325
%modifier somewhat    booster=-0.07325
%modifier not         negation=0.74
%modifier never       negation=0.74
%modifier "isn't"     negation=0.74
%modifier "don't"     negation=0.74

# output columns: polarity in context (after the modifiers), and its three terms
%feature valence  = value(polarity)
%feature sentiment = value(polarity) terms=neg,neu,pos kernel=triangular centers=-1,0,1
