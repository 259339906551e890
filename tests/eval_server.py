"""A model server on loopback that grounds by looking: it finds the red in the last image it receives and answers a
click at its centre, in the profile's 0..1000 coordinates of that image (the vLLM shapes of tests/fake_vllm.py).
What the eval scores is then exactly its own handling: the image it sent, and the mapping of the answer back."""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np
from PIL import Image

from tests.fake_vllm import FakeVLLM


def last_image(body: dict[str, Any]) -> Image.Image:
    urls = [p["image_url"]["url"] for m in body["messages"] if isinstance(m.get("content"), list)
            for p in m["content"] if p.get("type") == "image_url"]
    return Image.open(io.BytesIO(base64.b64decode(urls[-1].split(",", 1)[1]))).convert("RGB")


def red_click(body: dict[str, Any]) -> tuple[int, Any, dict[str, str]]:
    img = np.asarray(last_image(body)).astype(int)
    mask = (img[..., 0] > 200) & (img[..., 1] < 60) & (img[..., 2] < 60)
    ys, xs = np.nonzero(mask)
    h, w = mask.shape
    if len(xs):
        x, y = (xs.min() + xs.max() + 1) / 2 / w * 1000, (ys.min() + ys.max() + 1) / 2 / h * 1000
    else:
        x, y = 0, 0
    answer = {"note": None, "thought": "The red one.", "tool_call": {
        "tool_name": "click", "element": "red", "x": round(x), "y": round(y), "button": "left", "count": 1}}
    return 200, json.dumps(answer), {}


class GroundingServer(FakeVLLM):
    """Answers `n` grounding requests by finding the red (then the fixed answer)."""

    def expect(self, n: int) -> GroundingServer:
        self.replies.extend([red_click] * n)
        return self
