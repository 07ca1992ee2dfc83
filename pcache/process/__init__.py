"""What a command does to its own process, applied by the command line around a command
(paused garbage collection), forked children of lint's token stage, and the machine a
measurement ran on."""
