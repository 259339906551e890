def check(ctx):
    text = ctx.clipboard().strip()
    if text in ("42", "42.0"):
        return True
    return f"the clipboard holds {text!r}, not 42" if text else "the clipboard is empty"
