import re


def check(ctx):
    answer = ctx.answer.lower()
    first = re.search(r"\d+", answer)
    if (first and first.group() == "4") or (not first and re.search(r"\bfour\b", answer)):
        return True
    return f"the answer was {ctx.answer!r}; there are 4 .txt files" if ctx.answer else "the run gave no answer"
