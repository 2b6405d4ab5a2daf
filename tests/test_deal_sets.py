"""The shipped deal sets are exactly what their documented command generates."""

from __future__ import annotations

import numpy as np
import pytest

from agents.evaluation import deal_sets
from agents.evaluation.deal_sets import DEAL_SETS, load_deal_set, render, sha256
from butifarra_env.core.cards import ALL_CARDS


@pytest.mark.parametrize("name", sorted(DEAL_SETS))
def test_shipped_file_matches_its_hash_and_the_generator(name: str) -> None:
    spec = DEAL_SETS[name]
    data = spec.path.read_bytes()
    assert sha256(data) == spec.sha256
    assert data == render(spec.n_deals, spec.seed)


def test_deals_are_complete_and_dealers_uniform() -> None:
    deals = load_deal_set("test")
    assert len(deals) == 10_000
    for _, hands in deals[:2000]:
        assert hands[0] | hands[1] | hands[2] | hands[3] == ALL_CARDS
        assert all(h.bit_count() == 12 for h in hands)
    # the shipped set's dealers (fixed by its hash): about 2,500 each, as a uniform draw gives
    assert np.bincount([d for d, _ in deals], minlength=4).tolist() == [2547, 2479, 2412, 2562]
    dev = np.bincount([d for d, _ in load_deal_set("dev")], minlength=4).tolist()
    assert dev == [482, 510, 492, 516]
    assert load_deal_set("dev")[0] != deals[0]  # the two sets are different deals


def test_a_changed_file_is_refused(tmp_path, monkeypatch) -> None:
    spec = DEAL_SETS["dev"]
    copy = tmp_path / spec.path.name
    copy.write_bytes(spec.path.read_bytes().replace(b'"dealer":3', b'"dealer":2', 1))
    monkeypatch.setattr(deal_sets, "DIR", tmp_path)
    with pytest.raises(ValueError, match="does not match its SHA-256"):
        load_deal_set("dev")
    with pytest.raises(ValueError, match="unknown deal set 'train'"):
        load_deal_set("train")
