"""Per-prompt seeds for servers and engines that take one seed per request."""

from __future__ import annotations

import random


def prompt_seed(seed: int, index: int) -> int:
    """A 31-bit seed for prompt `index` of a call seeded `seed`.

    Servers derive the n samples' seeds from the request seed (often seed + j), so plain
    seed + index would make prompt i's sample j repeat prompt i+1's sample j-1.
    """
    return random.Random(f"{seed}:{index}").getrandbits(31)
