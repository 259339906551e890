"""The test Settings → Model → "Test on this computer" runs (sample.py: a fixed 50-item sample of a grounding
suite, its licence agreed to before any download) and the results kept in the data folder for comparison (kept.py:
every grounding run's summary, the command line's included). Qt-free: the window runs it on a worker thread. May
import app.domain, app.setup (the engine the settings name) and app.eval's grounding modules; never app.eval.replay.
"""
