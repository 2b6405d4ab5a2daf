"""The shipped checkpoint's logits on a fixed set of observations equal the golden file
(``tests/goldens/make_ppo_logits.py`` made it), so that a change to the network code or the
weights cannot pass unnoticed.

Equal to 2e-4 (logits reach about 100), with the same greedy action everywhere: torch's CPU
kernels sum in a different order on another instruction set (AVX2 vs AVX-512 differ by up to
5e-5 here), while any change to a weight or a layer moves logits by far more."""

from __future__ import annotations

import numpy as np

from tests.extras import need

need("torch")

from tests.goldens.make_ppo_logits import GOLDEN, observations, shipped_outputs  # noqa: E402


def test_shipped_logits_equal_the_golden() -> None:
    golden = np.load(GOLDEN)
    obs, mask = observations()
    np.testing.assert_array_equal(obs, golden["obs"])  # the same positions
    np.testing.assert_array_equal(mask, golden["mask"])
    logits, _ = shipped_outputs(golden["obs"], golden["mask"])
    assert logits.dtype == golden["logits"].dtype
    np.testing.assert_allclose(logits, golden["logits"], rtol=0, atol=2e-4)
    np.testing.assert_array_equal(logits.argmax(axis=1), golden["logits"].argmax(axis=1))
