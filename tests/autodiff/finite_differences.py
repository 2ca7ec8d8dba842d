"""Central finite differences of a scalar loss, the reference the gradient tests compare
against (float64 inputs)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def central_differences(loss_of: Callable[[np.ndarray], float], x: np.ndarray,
                        eps: float = 1e-6) -> np.ndarray:
    """d loss / d x, element by element: (loss(x + eps) - loss(x - eps)) / (2 eps)."""
    out = np.zeros_like(x)
    for k in range(x.size):
        up, down = x.copy(), x.copy()
        up.reshape(-1)[k] += eps
        down.reshape(-1)[k] -= eps
        out.reshape(-1)[k] = (loss_of(up) - loss_of(down)) / (2 * eps)
    return out
