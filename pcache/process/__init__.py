"""What a command does to its own process, applied by the command line around a command:
paused garbage collection, structures handed to the end of the process, forked pure
computations, and the machine a measurement ran on."""
