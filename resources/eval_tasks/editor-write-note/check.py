def check(ctx):
    text = (ctx.work / "shopping.txt").read_text(encoding="utf-8")
    if "Buy milk and eggs" not in text:
        return f"shopping.txt holds {text[:80]!r}, not “Buy milk and eggs”"
    return True
