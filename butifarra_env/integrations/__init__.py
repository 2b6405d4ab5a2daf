"""Butifarra inside other RL frameworks: one submodule per framework.

Each adapter imports its framework only when imported itself:
``import butifarra_env.integrations.openspiel`` registers the OpenSpiel game
``python_butifarra``; ``butifarra_env.integrations.rllib`` holds the RLlib adapters. This
package stays import-light (no framework). The hidden-card sampling they share is in the
rules core: :mod:`butifarra_env.core.sampling`.
"""
