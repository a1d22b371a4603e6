"""A home-automation agent for the ADK example set (``examples/adk_home/adk_home.evalset.json``).

It is the runtime's :class:`evalcore.runtime.Agent`: a chat model at the OpenAI-compatible
endpoint ``EVALSITE_MODEL_BASE_URL`` (model ``EVALSITE_MODEL``, default ``home-model``) with three
tools over the session's state, played turn by turn on one session.
"""

from __future__ import annotations

import os
from typing import Any

from evalcore.discovery import TargetSpec
from evalcore.runtime import Agent, tool
from evalcore.targets import RunContext


def _state(ctx: RunContext) -> dict[str, Any]:
    return ctx.session.state if ctx.session is not None else {}


@tool
def set_device_info(device_id: str, status: str, ctx: RunContext) -> str:
    """Switch a device on or off.

    Args:
        device_id: The device, e.g. ``kitchen_lamp``.
        status: ``ON`` or ``OFF``.
    """
    _state(ctx)[device_id] = status
    return f"{device_id} is {status}"


@tool
def get_temperature(location: str, ctx: RunContext) -> int:
    """The temperature of a room in degrees Celsius.

    Args:
        location: The room, e.g. ``living_room``.
    """
    return int(_state(ctx).get(location, 20))


@tool
def set_temperature(location: str, temperature: int, ctx: RunContext) -> str:
    """Set a room's thermostat.

    Args:
        location: The room, e.g. ``living_room``.
        temperature: Degrees Celsius.
    """
    _state(ctx)[location] = temperature
    return f"{location} set to {temperature}"


home = TargetSpec(
    id="adk-home",
    target=Agent(
        os.environ.get("EVALSITE_MODEL", "home-model"),
        [set_device_info, get_temperature, set_temperature],
        instructions="You control the devices of a home. Use the tools; answer in one sentence.",
        name="home_automation_agent",
        temperature=0,
        seed=7,
    ),
    description="The runtime's Agent on the ADK home-automation set",
)
