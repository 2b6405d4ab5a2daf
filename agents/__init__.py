"""Agents that play Butifarra from a seat's observation: the interface, baselines, registry."""

from agents.base import Agent, agent_names, make_agent, register_agent
from agents.random_agent import RandomAgent
from agents.rule_based import RuleBasedAgent

__all__ = ["Agent", "RandomAgent", "RuleBasedAgent", "agent_names", "make_agent", "register_agent"]
