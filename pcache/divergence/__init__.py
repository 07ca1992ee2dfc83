"""Where two prompts stop sharing a cached prefix, and why: the one explanation of a lost token.

- `classify.explain`: the first divergence of a later prompt from an earlier one, its cause
  (`causes.CAUSES`) and how far the changed unit reaches on each side;
- `history`: how the messages of a later request relate to an earlier one of its conversation;
- `compare`: `pcache diff` of two requests (the divergence, what each cache profile reuses).

`pcache lint` charges each lost token to one such divergence (`pcache.rules.cost`), `pcache
diff` prints it with the rule it breaks, and the report labels its branch points with it.
"""
