"""Declared device time: a stable, documented cost per unit of work actually computed.

Real compute on a shared two-core machine is noisy; a candidate that skips work must still be
measurably faster by a factor that can be stated in advance. So each unit the pipeline computes
is charged a declared cost, accumulated over a step and slept once per step (one wake-up per
step keeps the overhead small and the total stable).
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass

from pydantic import ValidationError

from engine.reference.errors import ProfileError
from engine.reference.profile import CostModel, EngineArgs
from ref2va_contract.launch import DECLARED_TIME_ENV

logger = logging.getLogger(__name__)

COST_MODEL_ENV = DECLARED_TIME_ENV


def resolve_cost_model(args: EngineArgs) -> tuple[CostModel, str]:
    """The profile's cost model, else the environment's, else zeros; plus where it came from.

    ``step-cost-ms`` is shorthand for ``step_ms`` and fills it when the chosen model has none.
    """
    model, source = CostModel.model_validate({}), "default"
    if args.cost_model is not None:
        model, source = args.cost_model, "profile"
    elif (raw := os.environ.get(COST_MODEL_ENV)) is not None:
        try:
            model = CostModel.model_validate(json.loads(raw))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise ProfileError(
                f"{COST_MODEL_ENV}: expected a JSON cost model, got {raw!r}: "
                f"{str(exc).splitlines()[0]}"
            ) from None
        source = f"env:{COST_MODEL_ENV}"
    if args.step_cost_ms and not model.step_ms:
        model = model.model_copy(update={"step_ms": args.step_cost_ms})
    return model, source


@dataclass
class WorkCounter:
    """Units of work computed in one step (reset after each charge)."""

    blocks: int = 0
    context: int = 0  # the DiT's context embedding (JointDiT.embed_condition), per branch
    text_kv: int = 0
    reference_kv: int = 0


class DeviceClock:
    """Accumulates a request's declared device time; the caller sleeps what :meth:`close_step`
    returns (through the server's monitor, so a cancel cuts the sleep short)."""

    def __init__(self, model: CostModel) -> None:
        self.model = model
        self.work = WorkCounter()
        self.total_ms = 0.0
        self.totals = WorkCounter()

    def close_step(self) -> float:
        """Seconds to charge for the step just computed."""
        model, work = self.model, self.work
        charged = (
            model.step_ms
            + model.block_ms * work.blocks
            + model.text_kv_ms * work.text_kv
            + model.ref_kv_ms * work.reference_kv
        )
        self.totals.blocks += work.blocks
        self.totals.context += work.context
        self.totals.text_kv += work.text_kv
        self.totals.reference_kv += work.reference_kv
        self.work = WorkCounter()
        self.total_ms += charged
        return charged / 1000.0

    def charge_decode(self, frames: int) -> float:
        charged = self.model.decode_ms_per_frame * frames
        self.total_ms += charged
        return charged / 1000.0
