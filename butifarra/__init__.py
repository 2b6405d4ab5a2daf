"""The ``butifarra`` command and the programs behind it: demo, arena, terminal play.

The top layer of the project: it may import every package below it (``train``, ``agents``,
``butifarra_env``); nothing imports it.
"""
