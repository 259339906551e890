"""The setup wizard: GPU check, model choice or download, summary. Pages share a `SetupContext`, never the wizard;
the work itself is `app.setup`'s."""
