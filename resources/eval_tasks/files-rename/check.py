def check(ctx):
    report, draft = ctx.work / "report.txt", ctx.work / "draft.txt"
    if not report.exists():
        return "there is no report.txt"
    if draft.exists():
        return "draft.txt is still there (copied, not renamed)"
    if report.read_text(encoding="utf-8") != "Quarterly report, first draft\n":
        return "report.txt does not hold what draft.txt held"
    if not (ctx.work / "budget.txt").exists():
        return "budget.txt is gone"
    return True
