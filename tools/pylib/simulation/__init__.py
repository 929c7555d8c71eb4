"""A discrete-event model of R2SP's consistency modes (tools/simulate): workers, links, servers
and the scheduler's slots, for predicting the modes beyond the cluster we can emulate."""
