"""The history of runs: the recorder's SQLite rows and screenshots, its file checks, the rows kept aside when it
cannot write, its recovery at start, and an exported run's report. May import `app.domain`; no Qt."""
