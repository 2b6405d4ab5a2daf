"""The environments over the rules core: the PettingZoo AEC env (:mod:`.aec`), the Gymnasium
single-agent and vector envs (:mod:`.gym_env`, :mod:`.gym_vector`), the batched engine
(:mod:`.batched`), replay through ``raw_env`` (:mod:`.replay`) and image rendering
(:mod:`.render_image`). Importing this package imports none of them."""
