"""`deskhand eval`: how good a model is on this machine. Grounding suites read in each dataset's own published
layout (ScreenSpot-v2, ScreenSpot-Pro, WebClick, OSWorld-G), fetched from the dataset's own repository into the
standard hub cache (resumable: app.setup's downloader); one localisation per item through the real engine (the
same screenshot handling and mapping as a real step); point-in-box scoring with intervals, latency, tokens and
memory; results, summaries and charts.

`replay/`: the user's own recorded runs, each step asked again and scored against what the user did. `trial/`: the
short sample Settings → General → "Test on this computer" runs, and the results kept for comparison.

Qt-free. May import app.domain, app.engine (the engine protocol, never llama_cpp) and app.setup (hub downloads);
replay reads the history database itself, read-only. The command line (app.cli.eval_cmd) and the Settings window
(app.ui.settings.model_test) sit above it.
"""
