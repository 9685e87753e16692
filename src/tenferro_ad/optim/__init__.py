"""Optimizers that update uniquely owned parameters in place, atomically, with the
vocabulary of optax and ``torch.optim``.

Optimizers: :class:`SGD` (momentum, Nesterov), :class:`Adam`, :class:`AdamW`,
:class:`RMSProp`; each takes ``weight_decay`` and ``clip_norm`` (clip the gradients by their
global norm first, as optax ``clip_by_global_norm`` and torch ``clip_grad_norm_``).  ``lr``
is a float or a schedule ``count -> float`` (:func:`constant_schedule`,
:func:`exponential_decay` (``staircase=True`` is step decay), :func:`cosine_decay_schedule`,
:func:`linear_schedule` (warmup), :func:`warmup_cosine_decay_schedule`), called with the
number of steps made before this one.

``opt.step(params, grads)`` takes matching pytrees (``tenferro_ad.tree_util``: lists,
tuples, dicts, namedtuples, registered dataclasses..., nested; ``None`` is an empty
subtree) of parameter owners (``Tensor``) and gradients.  A gradient is a ``Tensor``
owner, a ``TensorView``, an ``EagerTensor`` handle, a numpy array, or ``None`` at a
parameter's position (skip that parameter); it is only read, never consumed.  A
:class:`~tenferro_ad.Gradients` bundle is not a structure of gradients: pass
``[bundle.grad(h) for h in handles]``.

**Sharded parameters** (``tenferro_storage.sharding.ShardedTensor``, gradients of the same
layout): each shard is updated on the host by the same rule (one state per device) between
two recorded ``TRANSFER`` copies (down and back up into its domain), since the host never
writes an XLA buffer; ``clip_norm`` is refused there (see ``optim/_sharded.py``).

**Complex parameters.**  tenferro's gradient of a real loss with respect to a complex
parameter follows JAX: it is the conjugate of the steepest-ascent direction
(``grad(|z|**2)(z) == 2 * conj(z)``).  Every optimizer therefore steps along
``conj(grad)``, which descends; the second moments of Adam and RMSProp are ``|g|**2`` and
kept in the real dtype.  (optax expects callers to conjugate JAX gradients themselves;
torch's complex gradients are already conjugated.)

**State follows the tree path**, as optax's state follows the parameters' structure: the
state of ``params['w']`` is the state of whatever owner sits at ``params['w']``, so a
parameter replaced by a new owner (a reload, a re-initialisation) continues its state and
no state outlives its path.  The structure of ``params`` is fixed by the first step: a step
with another structure is refused, showing both (use one optimizer per structure).

A step is all or nothing:

1. the two structures are compared (same nesting, same dict keys, same lengths; the error
   shows both) and every parameter and gradient is checked (a live floating-point owner; a
   gradient of the parameter's shape whose dtype can be written into it without dropping an
   imaginary part; no parameter twice; state of the parameter's shape and dtype), and the
   learning rate is evaluated — the first problem raises an error naming the parameter's
   path (``params['w']``) and changes nothing;
2. every parameter is borrowed exclusively (``as_view_mut``); a parameter borrowed
   elsewhere raises ``BorrowError`` and changes nothing;
3. state buffers for parameters seen for the first time, and the scratch, are allocated
   (``OPERATION_OUTPUT`` events, the first time only);
4. only then are values and state written — numpy ufuncs with ``out=`` into the
   parameters, their state and the scratch, with numpy's floating-point error settings
   suspended so that no ufunc raises halfway — and the step count advanced.

The scratch is three arrays the size of the largest parameter (two in its dtype, one in its
real dtype), owned by the optimizer and reused: steady-state steps record no copy and no
allocation events, and make no numpy temporaries.

**Saving and resuming**: :meth:`~SGD.state_dict` returns the state keyed by tree path
(copies of the buffers), which ``tenferro_storage.save`` writes; ``load_state_dict``
restores it into an optimizer built with the same arguments.  Optimizers refuse ``pickle``
and ``copy`` (their state is owners) and say so.
"""

from ._base import Optimizer, Schedule
from ._rules import SGD, Adam, AdamW, RMSProp
from ._schedules import (
    constant_schedule,
    cosine_decay_schedule,
    exponential_decay,
    linear_schedule,
    warmup_cosine_decay_schedule,
)

__all__ = [
    "SGD",
    "Adam",
    "AdamW",
    "Optimizer",
    "RMSProp",
    "Schedule",
    "constant_schedule",
    "cosine_decay_schedule",
    "exponential_decay",
    "linear_schedule",
    "warmup_cosine_decay_schedule",
]
