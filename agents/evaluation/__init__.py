"""Measuring agents: duplicate-deal duels, round robins and ratings (:mod:`.arena`), the
shipped deal sets (:mod:`.deal_sets`), confidence intervals (:mod:`.stats`),
variance-reduced estimates (:mod:`.variance`) and the evaluation protocol with its result
cards (:mod:`.protocol`). Above the agents, below training; importing this package imports
none of them."""
