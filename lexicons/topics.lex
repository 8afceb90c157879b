# topics.lex — the word classes of the idea-gating drift corpus (grammars/drift.fsg,
# docs/idea_gating.md). Two topics, a zoology one and a comics one, share the bridge
# words (BRIDGE): "the bat hunts moths" is zoology, "the bat fights thugs" is comics.
# The *_TERMS classes are the domain terms counted by the stickiness measure: words
# only one topic uses.

%class BRIDGE      bat robin spider
%class SHARED_VERB sleeps waits hides
%class SHARED_PLACE cave night

%class ZOO_SUBJ    owl moth beetle
%class ZOO_VERB    eats hunts catches
%class ZOO_OBJ     insects moths worms seeds
%class ZOO_PLACE   forest nest meadow

%class COMIC_SUBJ  hero villain sidekick
%class COMIC_VERB  fights rescues defeats
%class COMIC_OBJ   thugs hostages criminals robots
%class COMIC_PLACE city rooftop tower

# stickiness: the topic-only words
%class ZOO_TERMS   owl moth beetle eats hunts catches insects moths worms seeds forest nest meadow
%class COMIC_TERMS hero villain sidekick fights rescues defeats thugs hostages criminals robots city rooftop tower
