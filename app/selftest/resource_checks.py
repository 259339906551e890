"""The files under `resources/`: model profile, risk rules, icons, model catalog."""

from __future__ import annotations

import sys

from app.selftest.report import Failed, Report


def check_resources(r: Report) -> None:
    from app.domain.resources import resource_path, resource_root

    root = resource_root()
    if not root.is_dir():
        r.fail("resources", f"{root} does not exist")
        return
    r.ok("resources", str(root))

    def profile() -> str:
        from app.engine.profile import load_profile

        p = load_profile()
        return f"{p.name} ({p.source.name}, {len(p.output['tools'])} tools)"

    def rules() -> str:
        from app.agent.policy import load_rules

        load_rules.cache_clear()
        rr = load_rules()
        return (f"{resource_path('risk_rules.json').name}: {len(rr.refused_keys)} refused and "
                f"{len(rr.risky_keys)} risky key combos")

    def icons() -> str:
        sizes = (16, 22, 24, 32, 48, 64, 128, 256, 512)
        needed = ["deskhand.svg", *(f"deskhand-{s}.png" for s in sizes)]
        if sys.platform == "win32":
            needed.append("deskhand.ico")
        if sys.platform == "darwin":
            needed.append("deskhand.icns")
        missing = [n for n in needed if not resource_path("icons", n).is_file()]
        if missing:
            raise Failed(f"missing in {resource_path('icons')}: {', '.join(missing)}")
        return f"{len(needed)} files (SVG, PNG {sizes[0]}–{sizes[-1]})"

    def catalog() -> str:
        path = resource_path("models", "catalog.json")
        if not path.is_file():
            return f"no built-in catalog in this build ({path.relative_to(root)} absent)"
        from app.setup.catalog import load_catalog

        cat = load_catalog(user_file=None, builtin=path)
        return f"{len(cat.models)} models, default {cat.default}"

    r.check("model profile", profile)
    r.check("risk rules", rules)
    r.check("icons", icons)
    r.check("model catalog", catalog)
