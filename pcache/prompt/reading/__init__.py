"""Reading inputs: files, logs and tables safely (size limits, line:column errors,
streaming), values held in memory, and what one line of a log means in its context."""
