def check(ctx):
    text = ctx.clipboard().strip()
    if text in ("1591", "1591.0", "1,591"):
        return True
    return f"the clipboard holds {text!r}, not 1591" if text else "the clipboard is empty"
