"""Qt-free core: actions, capture, execution, the agent loop and the record of each run."""
