"""scripts/proactivity: does a proactive suggestion at the start of a session help, or is it noise?

``generator``: seeded coding-workspace histories of several personas, with the hidden
state a user has in mind; ``truth``: what would genuinely help at each moment;
``replay``: the pure pipeline (behavior records, attention, suggestions) over simulated
time, scored against the truth beside a trivial baseline; ``continuity``: the real
daemon's first pack of a new session after a history ending days ago; ``run``: the CLI.
See docs/PROACTIVITY.md.
"""
