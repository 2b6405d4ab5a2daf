"""The rules core, numpy only: card tables, action ids, the rules as pure functions, the
one-hand state machine (:class:`~butifarra_env.core.game.Game`), options, input checks, the
observation layout and its named views, text rendering and deal sampling. Every engine,
agent and program builds on these modules; none of them imports a framework."""
