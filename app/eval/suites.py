"""The grounding suites Deskhand knows: where each is published, under which licence, and how its layout is read."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from app.domain.errors import DeskhandError
from app.eval.items import Item
from app.eval.osworld import load_osworld_g
from app.eval.screenspot import load_screenspot_pro, load_screenspot_v2
from app.eval.webclick import load_webclick


@dataclass(frozen=True)
class Suite:
    name: str  # what --suite takes
    title: str
    repo: str | None  # the Hugging Face dataset it is published as (None: not on the hub)
    revision: str | None  # a pinned commit where one is known; None: the repository's main branch
    license: str
    patterns: tuple[str, ...]  # the files of the repository the loader reads
    load: Callable[[Path], list[Item]]
    home: str  # where a person reads about it (and, for a suite not on the hub, gets it)
    published: str  # which figures to set results beside
    breakdown: tuple[str, ...]  # the groups its published tables use, first

    @property
    def page(self) -> str:
        return f"https://huggingface.co/datasets/{self.repo}" if self.repo else self.home


SUITES: dict[str, Suite] = {s.name: s for s in (
    Suite("screenspot-v2", "ScreenSpot-v2", "OS-Copilot/ScreenSpot-v2", None, "Apache-2.0",
          ("screenspot_desktop_v2.json", "screenspot_mobile_v2.json", "screenspot_web_v2.json",
           "screenspotv2_image.zip"), load_screenspot_v2, "https://huggingface.co/datasets/OS-Copilot/ScreenSpot-v2",
          "H Company's model cards report ScreenSpot-v2 for Holo1.5 and Holo2 (1,272 items, all of them).",
          ("platform", "kind", "platform/kind")),
    Suite("screenspot-pro", "ScreenSpot-Pro", "likaixin/ScreenSpot-Pro", None,
          "no licence stated on the dataset card: used on this computer only, never redistributed",
          ("annotations/*.json", "images/*", "images/*/*"), load_screenspot_pro,
          "https://github.com/likaixin2000/ScreenSpot-Pro-GUI-Grounding",
          "H Company: Holo2-4B 57.2 single pass (1,581 items, all of them).", ("group", "kind", "group/kind")),
    # The revision is the one a third-party benchmark pinned (verify); --revision main takes the newest.
    Suite("webclick", "WebClick (H Company)", "Hcompany/WebClick", "9482a7d5aaa8f4cd5d28d9ed0c8e0c48d20b1e4a",
          "Apache-2.0", ("data/test-*.parquet",), load_webclick, "https://huggingface.co/datasets/Hcompany/WebClick",
          "H Company's dataset card and model cards (1,639 items, all of them).", ("bucket",)),
    Suite("osworld-g", "OSWorld-G", None, None, "Apache-2.0 (the OSWorld-G repository's)", ("benchmark/*",),
          load_osworld_g, "https://github.com/xlang-ai/OSWorld-G",
          "The OSWorld-G paper (Jedi) and the model cards that cite it (564 items).", ("category",)),
)}


def suite(name: str) -> Suite:
    key = name.strip().lower().replace("_", "-")
    if key not in SUITES:
        raise DeskhandError(f"There is no grounding suite “{name}”.", f"Use one of: {', '.join(SUITES)}.")
    return SUITES[key]
