def check(ctx):
    text = (ctx.work / "letter.txt").read_text(encoding="utf-8")
    if "Bob" in text:
        return "the letter still says Bob"
    if not text.startswith("Dear Alice,"):
        return f"the letter starts {text.splitlines()[0] if text else '(empty)'!r}, not “Dear Alice,”"
    if "Thank you for the lovely flowers." not in text or "Anna" not in text:
        return "the rest of the letter was changed too"
    return True
