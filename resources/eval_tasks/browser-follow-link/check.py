def check(ctx):
    titles = ctx.window_titles()
    if any("Price list" in t for t in titles):
        return True
    return f"no browser window shows the price list (windows: {', '.join(titles) or 'none'})"
