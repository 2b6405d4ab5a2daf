"""Agents that play Butifarra from a seat's observation: the interface, baselines, registry.

Layers: :mod:`agents.base` (the :class:`Agent` interface) < the concrete agents
(:mod:`agents.random_agent`, :mod:`agents.rule_based`, :mod:`agents.ppo_agent`,
:mod:`agents.search_agent`) < :mod:`agents.registry` (build by name) < the evaluation
(:mod:`agents.evaluation`: arena, deal sets, statistics, protocol). Importing this package
loads neither torch nor the evaluation.
"""

from agents.adapters import as_agent
from agents.base import Agent, check_batch
from agents.random_agent import RandomAgent
from agents.registry import (
    AGENT_FACTORIES,
    DEFAULT_PPO_CHECKPOINT,
    PPO_RELEASES,
    R1_PPO_CHECKPOINT,
    R5_PPO_CHECKPOINT,
    R6_PPO_CHECKPOINT,
    R7_PPO_CHECKPOINT,
    R8_PPO_CHECKPOINT,
    R9_PPO_CHECKPOINT,
    R10_PPO_CHECKPOINT,
    R11_PPO_CHECKPOINT,
    agent_names,
    make_agent,
    register_agent,
)
from agents.rule_based import RuleBasedAgent

__all__ = [
    "AGENT_FACTORIES",
    "DEFAULT_PPO_CHECKPOINT",
    "PPO_RELEASES",
    "R1_PPO_CHECKPOINT",
    "R5_PPO_CHECKPOINT",
    "R6_PPO_CHECKPOINT",
    "R7_PPO_CHECKPOINT",
    "R8_PPO_CHECKPOINT",
    "R9_PPO_CHECKPOINT",
    "R10_PPO_CHECKPOINT",
    "R11_PPO_CHECKPOINT",
    "Agent",
    "RandomAgent",
    "RuleBasedAgent",
    "agent_names",
    "as_agent",
    "check_batch",
    "make_agent",
    "register_agent",
]
