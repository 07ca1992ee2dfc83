"""`pcache replay --replicas N --router R`: one pool per replica behind a router (`routers/`,
one module each), serial or timed, and what the fleet adds to the report."""
