# VADER and AFINN files pulled in as they are, with classes and features on top
%feature valence_raw range=-5..5
%include "mini_vader.txt" format=vader
%include "mini_afinn.txt" format=afinn
%class EMOTICON ":-)" "(-:" "%)"
%feature happy = class(EMOTICON) & has(polarity)
%feature pos = value(polarity, part=pos) terms=low,high centers=0.2,0.8
good polarity=0.5    # local lines win over included ones
