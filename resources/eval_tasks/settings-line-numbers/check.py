import configparser
import time

SECTION = "org/xfce/mousepad/preferences/view"


def line_numbers(path):
    if not path.exists():
        return None
    keys = configparser.ConfigParser(interpolation=None, strict=False)
    keys.read(path, encoding="utf-8")
    return keys.get(SECTION, "show-line-numbers", fallback=None)


def check(ctx):
    path = ctx.home / ".config" / "glib-2.0" / "settings" / "keyfile"
    for _ in range(30):  # GSettings writes its file a moment after the change
        if line_numbers(path) == "true":
            return True
        time.sleep(0.1)
    return f"show-line-numbers is {line_numbers(path) or 'not set'} in Mousepad's settings"
