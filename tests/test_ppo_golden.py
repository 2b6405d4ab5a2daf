"""The shipped checkpoint's logits on a fixed set of observations are bit-identical to the
golden file (``tests/goldens/make_ppo_logits.py`` made it), so that a change to the network
code or the weights cannot pass unnoticed."""

from __future__ import annotations

import numpy as np

from tests.extras import need

need("torch")

from tests.goldens.make_ppo_logits import GOLDEN, observations, shipped_outputs  # noqa: E402


def test_shipped_logits_are_bit_identical_to_the_golden() -> None:
    golden = np.load(GOLDEN)
    obs, mask = observations()
    np.testing.assert_array_equal(obs, golden["obs"])  # the same positions
    np.testing.assert_array_equal(mask, golden["mask"])
    logits, _ = shipped_outputs(golden["obs"], golden["mask"])
    assert logits.dtype == golden["logits"].dtype
    np.testing.assert_array_equal(logits, golden["logits"])
