"""Text cut into pieces the tokenizer can take.

llama.cpp pre-tokenizes with std::regex for tokenizers it has no hand-written splitter for (Holotron's
"tekken" among them), and std::regex recurses once per character of a match: about 25,000 characters of
one class in a row (letters without a space, spaces, slashes) overflow the stack and kill the process.
No piece handed to `llama_tokenize` is longer than MAX_PIECE characters, so no match can be either."""

from __future__ import annotations

# A match of 1,024 characters needs a few hundred KiB of stack: well inside any thread's.
MAX_PIECE = 1024


def tokenizer_pieces(text: str, limit: int = MAX_PIECE) -> list[str]:
    """`text` in order, in pieces of at most `limit` characters.

    A cut goes before the last whitespace that follows other text in the window, where the pre-tokenizer
    splits anyway (ordinary prose tokenizes as it would whole); a run with no such place is cut at `limit`."""
    pieces: list[str] = []
    start = 0
    while len(text) - start > limit:
        end = start + limit
        cut = end
        while cut > start + 1 and not (text[cut].isspace() and not text[cut - 1].isspace()):
            cut -= 1
        pieces.append(text[start:cut if cut > start + 1 else end])
        start = cut if cut > start + 1 else end
    pieces.append(text[start:])
    return pieces
