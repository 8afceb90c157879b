# a small lexicon: every kind of line
%feature polarity range=-1..1 terms=neg,neu,pos kernel=triangular centers=-1,0,1
%feature strength range=0..1  terms=low,med,high  kernel=power(base=0.9, tau=0.35) centers=0.2,0.6,1.0
%class INTENS slightly very
%class ADJ    good bad "so-so"
%modifier very booster=0.25 window=1
%modifier not  negation

slightly  strength=0.2
very      strength=0.8
good      polarity=0.6     # a comment after an entry
bad       polarity=-0.6
"so-so"   polarity=0
"can't stand" polarity=-0.6
plain
