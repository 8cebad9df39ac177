"""The answer key as a student would write it: the same modules as
assignments/, filled in. Generate the stubs with `shardlab stubs`."""
