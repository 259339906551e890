"""`deskhand eval replay`: the current model asked again at each step of the user's own recorded runs, with the
screenshot and the history the step had, and scored against what the user did (approved, edited, rejected).

history.py reads the runs (read-only), judge.py says what each step's right answer was and compares, asking.py
asks the engine, summary.py gives the figures, session.py runs it all. Offline and private: the history never
leaves this computer (the command line refuses a model server on another one). May import app.domain,
app.engine and app.eval's own modules; never app.eval.trial.
"""
