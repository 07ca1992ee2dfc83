"""Options as pcache declares them once: the rendering and hashing `Settings` every command
embeds, the declaration of an option's flag, help and panel beside its field (`declared`), and
the one check of a number a user gives (`numbers`)."""
