"""Where two prompts stop sharing a cached prefix, and why: the one explanation of a lost token.

- `classify.explain`: the first divergence of a later prompt from an earlier one, its cause
  (`causes.CAUSES`) and how far the changed unit reaches on each side;
- `regions`: the runs of sentences that differ between two versions of one text, and the kind
  of value each holds (a clock, an id, per-user data);
- `history`: how the messages of a later request relate to an earlier one of its conversation;
- `compare`: `pcache diff` of two requests (the divergence, what each cache profile reuses).

`pcache lint` classifies what differs between requests with the same rules
(`pcache.rules.defects`) and charges each defect what its fix saves in the fixed log
(`pcache.rules.fixed_replay`); `pcache diff` prints the divergence with the rule it breaks,
and the report labels its branch points with it.
"""
