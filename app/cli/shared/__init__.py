"""What several subcommands share: argument types and groups (the engine options, the model pair), the choice of
engine from them, printing model text safely to a terminal, and reading the history file. May import what
app.cli may import; never a subcommand module."""
