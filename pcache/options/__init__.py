"""Options as pcache declares them once: the declaration of an option's flag, help and panel
beside its field (`declared`), and the one check of a number a user gives (`numbers`). A leaf:
the `Settings` every command embeds (`pcache.settings`) and each driver's options build on it."""
