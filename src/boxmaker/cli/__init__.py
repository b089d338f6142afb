"""The command-line entry points: `loopd` and `bxctl`."""
