def check(ctx):
    folder = ctx.work / "Invoices 2024"
    if folder.is_dir():
        return True
    there = sorted(p.name for p in ctx.work.iterdir())
    return f"there is no folder “Invoices 2024” in the work folder (it holds: {', '.join(there) or 'nothing'})"
