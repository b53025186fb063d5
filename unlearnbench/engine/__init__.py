"""The evaluation engine behind `session.Bench`, one job per module: `roster`
(which checkpoints and reference models each suite runs), `models` (loading,
attacking and releasing them), `data` (each suite's data and what its cache
keys read of it), `results` (each suite's metrics on each checkpoint,
computed once, and what failed) and `judging` (gates, power, Holm and the
verdicts). Nothing here imports pytest."""
