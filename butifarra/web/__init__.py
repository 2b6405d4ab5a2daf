"""The browser table: play against the agents, a fair (duplicate) comparison with a bot,
and a replay viewer for game records.

- :mod:`butifarra.web.tables`: one person's table (hands, match, duplicate bot), no web code.
- :mod:`butifarra.web.app`: the Starlette app (sessions, limits, JSON API, static page).
- :mod:`butifarra.web.replay`: records as frames, and :class:`~butifarra.web.replay.ReplayView`
  for Jupyter (self-contained HTML, no server).
- :mod:`butifarra.web.serve`: ``butifarra serve`` under uvicorn.

Importing this package loads no web framework: the replay viewer works in a notebook with
only the core dependencies.
"""
