# domains.lex — domain terms for the idea-gating stickiness measure on real text
# (docs/idea_gating.md). A generated continuation of a prompt about one domain scores
# the hits of that domain's terms per 100 generated words. The lists are written for
# WikiText-2 (case-sensitive, its tokenisation); words outside a model's vocabulary
# never count.

%class MUSIC    song songs album albums band single singles music singer guitar chart charts vocals lyrics recorded recording tour track tracks Billboard concert studio release released video producer
%class MILITARY army battle battles troops division regiment war soldiers military forces attack infantry artillery enemy fleet ship ships navy captain officers commander killed fighting
%class SPORT    season game games team league match goals player players club championship scored coach win won football played
