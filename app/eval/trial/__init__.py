"""The test Settings → General → "Test on this computer" runs (sample.py: a fixed 50-item sample of a grounding
suite, its licence agreed to before any download) and the results kept in the data folder for comparison (kept.py:
every grounding run's summary, the command line's included); lent.py: the model the app's agent worker holds, lent
to the test so that it is never loaded twice. Qt-free: the window runs it on a worker thread. May import app.domain,
app.engine (the engine protocol), app.setup (the engine the settings name) and app.eval's grounding modules; never
app.eval.replay.
"""
