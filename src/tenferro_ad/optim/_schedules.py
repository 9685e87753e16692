"""Learning-rate schedules: small frozen value objects, called with the step count.

A schedule maps the number of updates made before this one (``0`` at the first step, as
optax's ``count``) to a learning rate.  Each is plain data (attrs, frozen): it compares by
value, prints its parameters, and costs O(1) per call with no allocation.  Any other
callable ``count -> float`` is accepted wherever a schedule is.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

__all__ = [
    "constant_schedule",
    "cosine_decay_schedule",
    "exponential_decay",
    "linear_schedule",
    "warmup_cosine_decay_schedule",
]


_Check = Callable[[Any, "attrs.Attribute[Any]", Any], None]


def _finite(name: str, schedule: str) -> _Check:
    def check(_: object, attribute: attrs.Attribute[Any], value: float) -> None:
        if not math.isfinite(value):
            raise ValueError(f"{schedule}: argument {name!r} must be finite, got {value!r}")

    return check


def _positive_int(schedule: str) -> _Check:
    def check(_: object, attribute: attrs.Attribute[Any], value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
            raise ValueError(
                f"{schedule}: argument {attribute.name!r} must be a positive int, got {value!r}"
            )

    return check


@attrs.frozen
class constant_schedule:
    """``value`` at every step (optax ``constant_schedule``; torch's constant lr).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) per step.
    Raises: nothing."""

    value: float = attrs.field(converter=float, validator=_finite("value", "constant_schedule"))

    def __call__(self, count: int) -> float:
        return self.value


@attrs.frozen
class exponential_decay:
    """``init_value * decay_rate ** (count / transition_steps)`` (optax ``exponential_decay``).

    ``staircase=True`` floors the exponent: the rate drops by ``decay_rate`` every
    ``transition_steps`` steps, which is torch's ``StepLR(step_size, gamma)``.
    ``transition_begin`` steps at ``init_value`` come first.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) per step.
    Raises: ArgumentError."""

    init_value: float = attrs.field(
        converter=float, validator=_finite("init_value", "exponential_decay")
    )
    transition_steps: int = attrs.field(validator=_positive_int("exponential_decay"))
    decay_rate: float = attrs.field(
        converter=float, validator=_finite("decay_rate", "exponential_decay")
    )
    transition_begin: int = 0
    staircase: bool = False

    def __call__(self, count: int) -> float:
        k = max(count - self.transition_begin, 0) / self.transition_steps
        return float(self.init_value * self.decay_rate ** (math.floor(k) if self.staircase else k))


@attrs.frozen
class cosine_decay_schedule:
    """Half a cosine from ``init_value`` down to ``alpha * init_value`` over ``decay_steps``
    steps, then constant (optax ``cosine_decay_schedule``; torch ``CosineAnnealingLR`` with
    ``eta_min = alpha * lr``).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) per step.
    Raises: ArgumentError."""

    init_value: float = attrs.field(
        converter=float, validator=_finite("init_value", "cosine_decay_schedule")
    )
    decay_steps: int = attrs.field(validator=_positive_int("cosine_decay_schedule"))
    alpha: float = attrs.field(
        default=0.0, converter=float, validator=_finite("alpha", "cosine_decay_schedule")
    )

    def __call__(self, count: int) -> float:
        frac = min(count, self.decay_steps) / self.decay_steps
        cosine = 0.5 * (1.0 + math.cos(math.pi * frac))
        return self.init_value * ((1.0 - self.alpha) * cosine + self.alpha)


@attrs.frozen
class linear_schedule:
    """From ``init_value`` to ``end_value`` linearly over ``transition_steps`` steps (after
    ``transition_begin`` steps at ``init_value``), then ``end_value``: a linear warmup when
    ``init_value < end_value`` (optax ``linear_schedule``; torch ``LinearLR``).

    Cost: no allocation; no copy; no sync; no dispatch; O(1) per step.
    Raises: ArgumentError."""

    init_value: float = attrs.field(
        converter=float, validator=_finite("init_value", "linear_schedule")
    )
    end_value: float = attrs.field(
        converter=float, validator=_finite("end_value", "linear_schedule")
    )
    transition_steps: int = attrs.field(validator=_positive_int("linear_schedule"))
    transition_begin: int = 0

    def __call__(self, count: int) -> float:
        frac = min(max(count - self.transition_begin, 0), self.transition_steps)
        frac_f = frac / self.transition_steps
        return (self.end_value - self.init_value) * frac_f + self.init_value


@attrs.frozen
class warmup_cosine_decay_schedule:
    """Linear warmup from ``init_value`` to ``peak_value`` over ``warmup_steps``, then a
    cosine decay to ``end_value`` ending at step ``decay_steps`` (which counts the warmup),
    as optax ``warmup_cosine_decay_schedule``.

    Cost: no allocation; no copy; no sync; no dispatch; O(1) per step.
    Raises: ArgumentError."""

    init_value: float = attrs.field(
        converter=float, validator=_finite("init_value", "warmup_cosine_decay_schedule")
    )
    peak_value: float = attrs.field(
        converter=float, validator=_finite("peak_value", "warmup_cosine_decay_schedule")
    )
    warmup_steps: int = attrs.field(validator=_positive_int("warmup_cosine_decay_schedule"))
    decay_steps: int = attrs.field(validator=_positive_int("warmup_cosine_decay_schedule"))
    end_value: float = attrs.field(
        default=0.0,
        converter=float,
        validator=_finite("end_value", "warmup_cosine_decay_schedule"),
    )

    def __attrs_post_init__(self) -> None:
        if self.decay_steps <= self.warmup_steps:
            raise ValueError(
                "warmup_cosine_decay_schedule: argument 'decay_steps' counts the warmup and "
                f"must exceed 'warmup_steps' ({self.warmup_steps}), got {self.decay_steps}"
            )

    def __call__(self, count: int) -> float:
        if count < self.warmup_steps:
            frac = count / self.warmup_steps
            return (self.peak_value - self.init_value) * frac + self.init_value
        span = self.decay_steps - self.warmup_steps
        frac = min(count - self.warmup_steps, span) / span
        cosine = 0.5 * (1.0 + math.cos(math.pi * frac))
        return (self.peak_value - self.end_value) * cosine + self.end_value
